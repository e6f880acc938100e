"""A stub of wandb for verify's real-script runs: no account, no network; every call
does nothing (kentaroy47/vision-transformers-cifar10 imports it whatever --nowandb says)."""


class _Config:
    def update(self, *args, **kwargs):
        pass


config = _Config()


def init(*args, **kwargs):
    pass


def watch(*args, **kwargs):
    pass


def log(*args, **kwargs):
    pass


def save(*args, **kwargs):
    pass
