# Writes mlx_lm_converted/<q4g64|q8g32|mxfp4>/{config.json,model.safetensors} beside this file:
# MLX's own `mlx_lm.convert -q` (mlx[cpu]==0.32.4, mlx-lm==0.32.2) of the float32 model that
#   python tools/make_llm.py MODEL --hidden 64 --mlp 64 --vocab 320
# writes (run that with Tessera's environment, then this with MLX's). The test converts the same
# model with mlx-lm on Tessera and compares the files tensor by tensor.
# Run: python make_mlx_lm_converted.py MODEL
import os
import shutil
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
model = sys.argv[1]
forms = {"q4g64": ["--q-bits", "4", "--q-group-size", "64"],
         "q8g32": ["--q-bits", "8", "--q-group-size", "32"],
         "mxfp4": ["--q-mode", "mxfp4"]}
for name, flags in forms.items():
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, name)
        subprocess.run([sys.executable, "-m", "mlx_lm", "convert", "--hf-path", model,
                        "--mlx-path", out, "-q", *flags], check=True)
        dest = os.path.join(here, "mlx_lm_converted", name)
        os.makedirs(dest, exist_ok=True)
        for f in ("config.json", "model.safetensors"):
            shutil.copy(os.path.join(out, f), os.path.join(dest, f))
