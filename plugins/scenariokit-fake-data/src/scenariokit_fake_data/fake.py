"""The generator behind ``helpers.fake``: names, e-mail addresses, passwords, addresses, text, numbers.

Everything comes from one :class:`random.Random`, so a seed gives the same sequence every time. The
values are plainly fake: e-mail addresses on ``example.com`` (reserved for examples) and phone numbers
in the 555-0100..0199 range (reserved for fiction).
"""

from __future__ import annotations

import datetime
import random
import string
import uuid
from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")

FIRST_NAMES = (
    "Ada",
    "Alan",
    "Amara",
    "Ann",
    "Bo",
    "Carlos",
    "Chen",
    "Dana",
    "Elif",
    "Emil",
    "Fatima",
    "Grace",
    "Hana",
    "Ivan",
    "Jonas",
    "Kenji",
    "Lena",
    "Leila",
    "Marta",
    "Mateo",
    "Nia",
    "Olga",
    "Omar",
    "Priya",
    "Quinn",
    "Rosa",
    "Sami",
    "Tariq",
    "Uma",
    "Viktor",
    "Wen",
    "Yusuf",
    "Zoe",
)
LAST_NAMES = (
    "Abebe",
    "Berg",
    "Costa",
    "Dubois",
    "Eriksen",
    "Fischer",
    "Garcia",
    "Haddad",
    "Ito",
    "Jensen",
    "Kowalski",
    "Lopez",
    "Müller",
    "Nakamura",
    "Okafor",
    "Petrov",
    "Quispe",
    "Rossi",
    "Silva",
    "Tanaka",
    "Ulloa",
    "Novak",
    "Weber",
    "Xu",
    "Yilmaz",
    "Zhang",
)
CITIES = (
    "Springfield",
    "Riverton",
    "Lakeside",
    "Fairview",
    "Greenville",
    "Oakridge",
    "Milton",
    "Clayton",
    "Brookfield",
    "Ashford",
    "Westport",
    "Kingston",
)
STREETS = ("Main", "Oak", "Pine", "Maple", "Cedar", "Elm", "Lake", "Hill", "Park", "Mill", "Church", "River")
STREET_KINDS = ("Street", "Avenue", "Road", "Lane", "Way", "Drive")
COMPANY_WORDS = ("Acme", "Globex", "Initech", "Umbrella", "Hooli", "Vandelay", "Stark", "Wonka", "Tyrell")
COMPANY_KINDS = ("Ltd", "Inc", "GmbH", "Group", "Labs", "Partners")
WORDS = (
    "alpha",
    "bright",
    "calm",
    "delta",
    "early",
    "field",
    "green",
    "harbor",
    "island",
    "jolly",
    "kind",
    "lemon",
    "morning",
    "north",
    "open",
    "quiet",
    "river",
    "silver",
    "table",
    "under",
    "velvet",
    "window",
    "yellow",
    "zenith",
)
SYMBOLS = "!#$%&*+-=?@_"


class FakeData:
    """Made-up test data; every value comes from one generator seeded with ``seed``."""

    def __init__(self, seed: int | str | None = None) -> None:
        #: the seed: put it in the environment as ``fakeSeed`` to get the same data again
        self.seed = seed
        self._random = random.Random(seed)
        self._serial = 0

    def __repr__(self) -> str:
        return f"FakeData(seed={self.seed!r})"

    def _next_serial(self) -> int:
        self._serial += 1
        return self._serial

    def choice(self, options: Sequence[T]) -> T:
        """One of ``options``."""
        return self._random.choice(options)

    def number(self, low: int = 0, high: int = 100) -> int:
        """A whole number from ``low`` to ``high``, both included."""
        return self._random.randint(low, high)

    def first_name(self) -> str:
        """A first name."""
        return self.choice(FIRST_NAMES)

    def last_name(self) -> str:
        """A last name."""
        return self.choice(LAST_NAMES)

    def name(self) -> str:
        """A full name: ``"Ann Okafor"``."""
        return f"{self.first_name()} {self.last_name()}"

    def username(self) -> str:
        """A user name, different from every other one this generator gave: ``"ann.okafor7"``."""
        plain = f"{self.first_name()}.{self.last_name()}".lower().replace("ü", "ue")
        return f"{plain}{self._next_serial()}"

    def email(self, domain: str = "example.com") -> str:
        """An e-mail address, different from every other one this generator gave."""
        return f"{self.username()}.{self.number(1000, 9999)}@{domain}"

    def password(self, length: int = 16) -> str:
        """A password with lower and upper case letters, a digit and a symbol (at least 8 characters)."""
        if length < 8:
            raise ValueError("a password needs at least 8 characters")
        pools = (string.ascii_lowercase, string.ascii_uppercase, string.digits, SYMBOLS)
        characters = [self._random.choice(pool) for pool in pools]
        everything = "".join(pools)
        characters += [self._random.choice(everything) for _ in range(length - len(characters))]
        self._random.shuffle(characters)
        return "".join(characters)

    def phone(self) -> str:
        """A phone number reserved for fiction: ``"+1 555-0142"``."""
        return f"+1 555-01{self.number(0, 99):02d}"

    def street_address(self) -> str:
        """A street address: ``"42 Maple Avenue"``."""
        return f"{self.number(1, 999)} {self.choice(STREETS)} {self.choice(STREET_KINDS)}"

    def city(self) -> str:
        """A city name."""
        return self.choice(CITIES)

    def postcode(self) -> str:
        """A five-digit postcode."""
        return f"{self.number(10000, 99999)}"

    def company(self) -> str:
        """A company name: ``"Globex Labs"``."""
        return f"{self.choice(COMPANY_WORDS)} {self.choice(COMPANY_KINDS)}"

    def sentence(self, words: int = 8) -> str:
        """A sentence of ``words`` words, capitalised, with a full stop."""
        text = " ".join(self.choice(WORDS) for _ in range(max(1, words)))
        return text[0].upper() + text[1:] + "."

    def date(self, start: str = "1950-01-01", end: str = "2030-12-31") -> str:
        """An ISO date from ``start`` to ``end`` (ISO dates, both included)."""
        first, last = datetime.date.fromisoformat(start), datetime.date.fromisoformat(end)
        return (first + datetime.timedelta(days=self.number(0, (last - first).days))).isoformat()

    def uuid(self) -> str:
        """A UUID (version 4 form) from the generator, so it repeats with the seed."""
        return str(uuid.UUID(int=self._random.getrandbits(128), version=4))
