# Writes mlx_0_32_4_add.mlxfn beside this file with MLX's CPU package (mlx[cpu]==0.32.4): MLX's
# export of x + y on two float32 vectors. Tessera does not read MLX's format; the test checks
# that import_function says so. Run: python make_mlx_mlxfn.py
import os
import mlx.core as mx

here = os.path.dirname(os.path.abspath(__file__))
mx.export_function(os.path.join(here, "mlx_0_32_4_add.mlxfn"), lambda x, y: x + y,
                   mx.array([1.0, 2.0]), mx.array([3.0, 4.0]))
