"""placeholder"""


def register() -> None:
    return None
