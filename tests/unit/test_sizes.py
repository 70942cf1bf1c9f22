import pytest

from lab.errors import UsageError
from lab.sizes import MAX_SIZE, format_size, parse_size


@pytest.mark.parametrize(("text", "expected"), [
    ("10kB", 10_000), ("100kB", 100_000), ("1MB", 1_000_000), ("10MB", 10_000_000), ("10MiB", 10_485_760),
    ("1KiB", 1024), ("123", 123), ("1", 1), ("1.5MB", 1_500_000), ("2 GB", 2_000_000_000), ("7B", 7),
])
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["-5", "abc", "10XB", "", "1.5B", "5GiB", "1e6", "0", "0kB"])
def test_bad_sizes_name_the_value(text):
    with pytest.raises(UsageError) as e:
        parse_size(text)
    assert repr(text) in str(e.value)
    assert "\n" not in str(e.value)


def test_max_size_is_allowed():
    assert parse_size(f"{MAX_SIZE}") == MAX_SIZE


def test_format_size():
    assert format_size(10_000_000) == "10 MB"
    assert format_size(1_500_000) == "1.5 MB"
    assert format_size(999) == "999 B"
