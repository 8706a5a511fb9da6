# Writes mlx_hadamard.npz beside this file with MLX's CPU package (mlx[cpu]): MLX's Hadamard
# transform (scale 1) of the identity for n = 12, 20, 28 (the rows are the columns of the H_m MLX
# uses) and of a random float32 matrix for n = m * 2^k. The tests read the file and never need
# MLX. Run: python make_mlx_hadamard.py
import os
import numpy as np
import mlx.core as mx

mx.set_default_device(mx.cpu)
rng = np.random.default_rng(5)
out = {}
for m in (12, 20, 28):
    out[f"eye_{m}"] = np.array(mx.hadamard_transform(mx.eye(m), scale=1.0))
    for k in (1, 3):
        n = m << k
        x = rng.standard_normal((3, n)).astype(np.float32)
        out[f"x_{n}"] = x
        out[f"y_{n}"] = np.array(mx.hadamard_transform(mx.array(x)))
np.savez_compressed(os.path.join(os.path.dirname(os.path.abspath(__file__)), "mlx_hadamard.npz"), **out)
