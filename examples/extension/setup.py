from setuptools import setup

from tessera import extension

setup(
    name="tessera_sample_extensions",
    version="0.1.0",
    description="A sample C++ extension of Tessera: one primitive with a CPU kernel and a vjp",
    ext_modules=[extension.CMakeExtension("tessera_sample_extensions._ext")],
    cmdclass={"build_ext": extension.CMakeBuild},
    packages=["tessera_sample_extensions"],
    zip_safe=False,
    python_requires=">=3.10",
)
