"""Encryption of secrets at rest (credential secrets, session tokens and storage state)."""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken

from scenariokit.domain.errors import ScenarioKitError


class SecretBox:
    """Encrypts and decrypts text with the server key (Fernet: AES-128-CBC with HMAC-SHA256)."""

    def __init__(self, key: str | bytes) -> None:
        raw = key.encode() if isinstance(key, str) else key
        try:
            self._fernet = Fernet(raw)
        except (ValueError, TypeError):
            # Any passphrase works as a key: it is stretched to the 32 bytes Fernet needs.
            self._fernet = Fernet(base64.urlsafe_b64encode(hashlib.sha256(raw).digest()))

    def encrypt(self, text: str) -> str:
        """The ciphertext of ``text``."""
        return self._fernet.encrypt(text.encode()).decode()

    def decrypt(self, token: str) -> str:
        """The text behind a ciphertext made with the same key."""
        try:
            return self._fernet.decrypt(token.encode()).decode()
        except InvalidToken:
            raise ScenarioKitError(
                "a stored secret cannot be decrypted: SCENARIOKIT_SECRET_KEY differs from the key it was "
                "written with"
            ) from None


def load_or_create_key(path: Path) -> str:
    """Read the key file at ``path``, creating it (mode 0600) with a new random key when missing."""
    if path.exists():
        return path.read_text().strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    key = Fernet.generate_key().decode()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(key + "\n")
    return key
