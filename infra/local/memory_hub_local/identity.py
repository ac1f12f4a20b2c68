"""The local account's credentials.

The emulated AWS side answers only requests signed (SigV4) with a secret it knows: the operator's
long-term key (``make run`` prints it; it opens everything in the local account, as an account
administrator's key would) and each function's own temporary credentials (Lambda gives each
function its role's: an access key, a secret and a session token), by which the emulated side
knows the function and holds it to the function's IAM policy.

All of them are derived from one random seed: kept in the data directory (readable by its owner
only) so the printed credentials stay the same across restarts, or made afresh for an ephemeral
stack. The stack hands the seed to the emulated AWS side through its environment, never on a
command line (which other local users can read). A function's access key id is public (derived
from its logical id alone); its secret and token are not."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

SEED_VARIABLE = "MEMORY_HUB_LOCAL_AWS_SEED"
SEED_FILE = "aws-credentials.seed"


def access_key_of(logical_id: str) -> str:
    """A function's access key id (temporary credentials start with ``ASIA``, as on AWS)."""
    return "ASIA" + hashlib.sha256(logical_id.encode()).hexdigest()[:16].upper()


@dataclass(frozen=True)
class Principal:
    """One access key the emulated side accepts: its secret, the session token it must come with
    (temporary credentials only), and whose it is (``None``: the operator)."""

    access_key: str
    secret: str
    token: str | None
    function: str | None


class Credentials:
    def __init__(self, seed: bytes) -> None:
        if len(seed) < 16:
            raise ValueError("the credentials' seed is too short")
        self._seed = seed

    @classmethod
    def create(cls, data_dir: Path | None) -> Credentials:
        """The data directory's credentials (made on first use), or fresh ones when there is none."""
        if data_dir is None:
            return cls(secrets.token_bytes(32))
        path = data_dir / SEED_FILE
        try:
            return cls(bytes.fromhex(path.read_text().strip()))
        except FileNotFoundError:
            pass
        except ValueError:
            raise RuntimeError(f"{path} is damaged: remove it to get new local credentials") from None
        data_dir.mkdir(parents=True, exist_ok=True)
        seed = secrets.token_bytes(32)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(seed.hex() + "\n")
        return cls(seed)

    @classmethod
    def from_environment(cls) -> Credentials:
        """What the stack handed to the emulated AWS side (fresh ones, that no one knows, without)."""
        value = os.environ.get(SEED_VARIABLE, "")
        return cls(bytes.fromhex(value)) if value else cls(secrets.token_bytes(32))

    def environment(self) -> dict[str, str]:
        """How the emulated AWS side's process receives these credentials."""
        return {SEED_VARIABLE: self._seed.hex()}

    def _derive(self, purpose: str, size: int) -> str:
        digest = hmac.new(self._seed, purpose.encode(), hashlib.sha256).digest()
        return base64.b32encode(digest).decode().rstrip("=")[:size]

    # ---------------------------------------------------------------- the operator
    @property
    def operator(self) -> Principal:
        key = "AKIA" + self._derive("operator-access-key", 16)
        secret = base64.b64encode(hmac.new(self._seed, b"operator-secret", hashlib.sha256).digest()[:30]).decode()
        return Principal(key, secret, None, None)

    # ---------------------------------------------------------------- each function
    def function(self, logical_id: str) -> Principal:
        secret = base64.b64encode(
            hmac.new(self._seed, b"function-secret:" + logical_id.encode(), hashlib.sha256).digest()[:30]
        ).decode()
        token = "local-session-" + self._derive("function-token:" + logical_id, 48)
        return Principal(access_key_of(logical_id), secret, token, logical_id)

    def principals(self, functions: list[str]) -> dict[str, Principal]:
        """Every access key the emulated side accepts, by access key id."""
        found = {self.operator.access_key: self.operator}
        for logical_id in functions:
            principal = self.function(logical_id)
            found[principal.access_key] = principal
        return found
