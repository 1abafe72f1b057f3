"""fsgd's failures as Python exceptions: the message fsgd printed and its exit
category (the table of `fsgd --help`: 2 usage, 3 data, 4 broker, 70
internal, 74 io)."""

CATEGORIES = {2: "usage", 3: "data", 4: "broker", 70: "internal", 74: "io", 130: "sigint", 143: "sigterm"}


class FsgdError(Exception):
    """An fsgd command or library call failed. message: what fsgd said
    ("fsgd: " prefix removed); status: its exit status; category: its name."""

    def __init__(self, message, status):
        lines = [ln[6:] if ln.startswith("fsgd: ") else ln for ln in message.splitlines()]
        self.message = "\n".join(lines)
        self.status = status
        self.category = CATEGORIES.get(status, "internal")
        super().__init__(f"{self.message} [{self.category}, status {status}]")


class UsageError(FsgdError, ValueError):
    """Bad option or value, job file error, refused output path."""


class DataError(FsgdError, ValueError):
    """Malformed rows, wrong or single-class labels, corrupt model."""


class BrokerError(FsgdError):
    """Kafka: broker unreachable or timed out, data lost."""


class FsgdIOError(FsgdError, OSError):
    """A file could not be read or written."""


_BY_STATUS = {2: UsageError, 3: DataError, 4: BrokerError, 74: FsgdIOError}


def error_for(status, message):
    return _BY_STATUS.get(status, FsgdError)(message, status)
