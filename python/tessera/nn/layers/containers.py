"""``Sequential``: modules called one after another."""

from tessera.nn.layers.base import Module


class Sequential(Module):
    """Calls its modules (or any callables) in order, each on the previous one's output.

    Args:
        modules: The modules, in order; kept in ``self.layers``.
    """

    def __init__(self, *modules):
        super().__init__()
        self.layers = list(modules)

    def __call__(self, x):
        for layer in self.layers:
            x = layer(x)
        return x
