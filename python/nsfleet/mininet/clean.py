"""Mininet's cleanup: nothing to do here, since an nsfleet network leaves nothing behind
(`nsfleet clean` removes what a crashed supervisor left)."""


def cleanup() -> None:
    pass


class Cleanup:
    @classmethod
    def cleanup(cls) -> None:
        pass
