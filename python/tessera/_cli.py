"""The ``tessera`` command installed with the wheel: runs the bundled C++ tool (launch, env, ...),
and ``tessera mlx enable | disable | status`` here (it concerns this Python environment).

Python ranks started by ``tessera launch`` run with this environment's interpreter
(TESSERA_PYTHON), not whichever ``python3`` comes first on PATH.
"""

import os
import sys


def main() -> None:
    if sys.argv[1:2] == ["mlx"]:
        from tessera.mlx._enable import main as mlx_main

        sys.exit(mlx_main(sys.argv[2:]))
    exe = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "tessera")
    if not os.access(exe, os.X_OK):
        sys.exit(f"tessera: the bundled command {exe} is missing; reinstall the package")
    env = dict(os.environ)
    env.setdefault("TESSERA_PYTHON", sys.executable)
    os.execve(exe, [exe] + sys.argv[1:], env)


if __name__ == "__main__":
    main()
