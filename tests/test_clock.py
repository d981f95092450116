"""The user's time zone: UTC names take the fast path, every other zone converts as before."""

from __future__ import annotations

from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import pytest

from memcli.clock import local_to_utc, local_zone, utc_to_local

INSTANTS = [datetime(2026, 1, 15, 12), datetime(2026, 7, 1, 23, 30), datetime(1970, 1, 1)]


@pytest.mark.parametrize(
    "tz", ["UTC", "Etc/UTC", ":UTC", "GMT", "Etc/GMT", "Zulu", "Etc/Universal", "UCT"]
)
def test_a_utc_zone_shows_stored_instants_as_they_are(monkeypatch, tz):
    monkeypatch.setenv("TZ", tz)
    for when in INSTANTS:
        assert utc_to_local(when) == when
        assert local_to_utc(when) == when


@pytest.mark.parametrize(
    "tz", ["Asia/Tokyo", "America/Los_Angeles", "Europe/Lisbon", "Australia/Lord_Howe", "Etc/GMT+5"]
)
def test_other_zones_convert_as_zoneinfo_does(monkeypatch, tz):
    """Etc/GMT+5 is five hours behind UTC (POSIX sign), not a UTC name: it converts."""
    monkeypatch.setenv("TZ", tz)
    zone = ZoneInfo(tz)
    assert local_zone() == zone
    for when in INSTANTS + [datetime(2026, 3, 29, 1, 30), datetime(2026, 10, 25, 0, 59)]:
        expected = when.replace(tzinfo=timezone.utc).astimezone(zone).replace(tzinfo=None)
        assert utc_to_local(when) == expected


def test_the_ends_of_datetimes_range_stay_as_they_are(monkeypatch):
    monkeypatch.setenv("TZ", "Pacific/Kiritimati")
    assert utc_to_local(datetime.max) == datetime.max
