"""The host platform as rune's registry knows it (rune/backends/__init__.py)."""


def _load():
    from .backend import BACKEND
    return BACKEND


def describe():
    """The registration of the host: NumPy buffers, DLPack's kDLCPU."""
    return dict(load=_load, dlpack=(1,),
                too_few=lambda n: f"only {n} host device(s) exist (set RUNE_HOST_DEVICES to have more)")
