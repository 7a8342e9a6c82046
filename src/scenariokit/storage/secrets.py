"""Encryption of secrets at rest (credential secrets, session tokens and storage states), and its keys.

``SCENARIOKIT_SECRET_KEY`` holds one or more keys, comma-separated: the first encrypts, all decrypt
(Fernet's MultiFernet), so a key can be rotated without losing what the old one wrote. A key is a
Fernet key (``Fernet.generate_key()``) or any other text, a passphrase, stretched with scrypt and the
store's own random salt. The store keeps the fingerprint of every key that encrypted something in it,
so a server given keys that cannot read it refuses to start (docs/deployment.md, "Keys and rotation").
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import hmac
import logging
import os
import time
from collections.abc import Iterable
from pathlib import Path

import attrs
from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

from scenariokit.domain.errors import SecretKeyError, SecretUnreadable

log = logging.getLogger(__name__)
__all__ = [
    "KeyRing",
    "KeyRotation",
    "SecretBox",
    "SecretKeyError",
    "SecretUnreadable",
    "derive_key",
    "fingerprint",
    "load_or_create_key",
    "new_key",
    "split_keys",
]

#: scrypt cost for passphrases: about 0.1 s once per process and store (derivations are cached).
SCRYPT_N, SCRYPT_R, SCRYPT_P = 2**15, 8, 1
_FINGERPRINT_LABEL = b"scenariokit secret key fingerprint v1"


def split_keys(setting: str) -> list[str]:
    """The keys of a ``SCENARIOKIT_SECRET_KEY`` value: comma-separated, blanks around them ignored."""
    keys = [part.strip() for part in setting.split(",") if part.strip()]
    if not keys:
        raise SecretKeyError("SCENARIOKIT_SECRET_KEY holds no key")
    return keys


def is_fernet_key(text: str) -> bool:
    """Whether ``text`` is a Fernet key (32 bytes, URL-safe base64), used as it is."""
    try:
        return len(base64.urlsafe_b64decode(text.encode())) == 32
    except (binascii.Error, ValueError):
        return False


@functools.lru_cache(maxsize=64)
def derive_key(passphrase: str, salt: bytes) -> bytes:
    """The Fernet key of a passphrase under a store's salt (scrypt; cached, as it is slow on purpose)."""
    raw = Scrypt(salt=salt, length=32, n=SCRYPT_N, r=SCRYPT_R, p=SCRYPT_P).derive(passphrase.encode())
    return base64.urlsafe_b64encode(raw)


def legacy_key(passphrase: str) -> bytes:
    """The key stores written before salted derivation used (one SHA-256): it only ever decrypts.

    ``scenariokit db rotate-key`` re-encrypts such secrets with the salted key.
    """
    return base64.urlsafe_b64encode(hashlib.sha256(passphrase.encode()).digest())


def fingerprint(key: bytes) -> str:
    """A name for a Fernet key that reveals nothing of it: an HMAC of a fixed label under the key."""
    return hmac.new(base64.urlsafe_b64decode(key), _FINGERPRINT_LABEL, hashlib.sha256).hexdigest()[:32]


@attrs.frozen
class KeyRing:
    """The Fernet keys of one store: ``keys[0]`` encrypts, every key decrypts."""

    keys: tuple[bytes, ...]

    @classmethod
    def from_setting(cls, setting: str, *, salt: bytes) -> KeyRing:
        """The keys a ``SCENARIOKIT_SECRET_KEY`` value names, passphrases derived with ``salt``.

        Each passphrase also brings its unsalted legacy key, last and for decrypting only.
        """
        keys: list[bytes] = []
        legacy: list[bytes] = []
        for text in split_keys(setting):
            if is_fernet_key(text):
                keys.append(text.encode())
            else:
                keys.append(derive_key(text, salt))
                legacy.append(legacy_key(text))
        return cls(tuple(dict.fromkeys([*keys, *legacy])))

    @property
    def primary(self) -> str:
        """The fingerprint of the key that encrypts."""
        return fingerprint(self.keys[0])

    @property
    def fingerprints(self) -> frozenset[str]:
        """The fingerprints of every key that decrypts."""
        return frozenset(fingerprint(key) for key in self.keys)

    def fingerprint_of(self, token: str) -> str | None:
        """The fingerprint of the key that decrypts ``token``, or None when none does."""
        for key in self.keys:
            try:
                Fernet(key).decrypt(token.encode())
            except InvalidToken:
                continue
            return fingerprint(key)
        return None


class SecretBox:
    """Encrypts with the first key of a ring and decrypts with any (Fernet: AES-128-CBC, HMAC-SHA256)."""

    def __init__(self, ring: KeyRing) -> None:
        self.ring = ring
        self._fernet = MultiFernet([Fernet(key) for key in ring.keys])

    def encrypt(self, text: str) -> str:
        """The ciphertext of ``text``, under the first key."""
        return self._fernet.encrypt(text.encode()).decode()

    def decrypt(self, token: str, *, what: str = "a stored secret") -> str:
        """The text behind a ciphertext made with any key of the ring; ``what`` names it in the error."""
        try:
            return self._fernet.decrypt(token.encode()).decode()
        except InvalidToken:
            raise SecretUnreadable(
                f"{what} cannot be decrypted with the keys in SCENARIOKIT_SECRET_KEY (it was written with "
                "another key, or damaged)"
            ) from None

    def rotate(self, token: str) -> str:
        """The same secret encrypted under the first key."""
        try:
            return self._fernet.rotate(token.encode()).decode()
        except InvalidToken:
            raise SecretUnreadable("a stored secret cannot be decrypted, so not re-encrypted") from None


@attrs.frozen
class KeyRotation:
    """What ``scenariokit db rotate-key`` did: secrets re-encrypted per column, and the key it used."""

    counts: dict[str, int]
    fingerprint: str

    @property
    def total(self) -> int:
        """Secrets re-encrypted in all."""
        return sum(self.counts.values())


def new_key() -> str:
    """A new random Fernet key, as text."""
    return Fernet.generate_key().decode()


def load_or_create_key(path: Path) -> str:
    """Read the key file at ``path``, creating it (mode 0600) with a new random key when missing.

    Creating one is logged with its path: it must be kept (and backed up) with the database.
    """
    if path.exists():
        return _read_key_file(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    key = new_key()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process created it first: use that one
        return _read_key_file(path)
    with os.fdopen(fd, "w") as handle:
        handle.write(key + "\n")
    log.info(  # INFO, which every scenariokit command shows: not a fault, but a file to keep
        "created a new secret key in %s (mode 0600): it encrypts the stored secrets; keep it, and back it "
        "up with the database",
        path,
    )
    return key


def _read_key_file(path: Path) -> str:
    """The key in ``path``; a file another process has just created may take a moment to be written."""
    for _ in range(20):
        key = path.read_text().strip()
        if key:
            return key
        time.sleep(0.05)
    raise SecretKeyError(f"the key file {path} is empty: put the database's key in it, or remove it")


def describe_fingerprints(fingerprints: Iterable[str]) -> str:
    """Fingerprints for a message, shortened as people compare them."""
    return ", ".join(sorted(f[:12] for f in fingerprints))
