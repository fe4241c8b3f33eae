"""Which IP addresses an image fetch may connect to: public ones only, by IANA's own registries.

Why not Python's `is_private`/`is_global` flags: they follow an older reading of
the registries and miss ranges a fetch must never reach (100.64.0.0/10, the
carrier-grade NAT space where 100.100.100.200 is a cloud metadata service and
Tailscale nodes live; all of 192.0.0.0/24; the deprecated site-local fec0::/10),
and they say nothing about IPv6 forms that carry an IPv4 address inside them
(6to4 2002::/16, Teredo 2001::/32, NAT64 64:ff9b::/96: `2002:a9fe:a9fe::` is
169.254.169.254). So the policy is spelled out here as data:

- IPv4: an address inside an entry of the IANA IPv4 Special-Purpose Address
  Registry is refused unless the most specific such entry says "Globally
  Reachable: True" (e.g. 192.0.0.9/32 inside the refused 192.0.0.0/24); the
  multicast block 224.0.0.0/4 (IPv4 Address Space registry) is refused too.
  Everything else is public unicast and allowed.
- IPv6: only global unicast 2000::/3 (IPv6 Address Space registry) can be
  public; everything outside it is refused (loopback, unspecified, the
  deprecated IPv4-compatible ::/96, ULA fc00::/7, link-local fe80::/10,
  site-local fec0::/10, multicast ff00::/8, the reserved rest). Inside it the
  IANA IPv6 Special-Purpose Address Registry applies as for IPv4, except that
  the entries which embed an IPv4 address (IPv4-mapped ::ffff:0:0/96, NAT64
  64:ff9b::/96, 6to4 2002::/16, Teredo 2001::/32) are judged by the IPv4
  addresses they carry: a wrapped private address is as private as the bare one.

Facts are IANA's (registries as published in 2025); the tables are ours.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Callable, Union

IPAddress = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]
IPNetwork = Union[ipaddress.IPv4Network, ipaddress.IPv6Network]


@dataclass(frozen=True)
class Block:
    """One registry entry: its prefix, name, defining RFC and IANA's "Globally Reachable" column
    (None where the registry says N/A)."""

    network: IPNetwork
    name: str
    rfc: str
    globally_reachable: bool | None
    embedded: Callable[[ipaddress.IPv6Address], list[ipaddress.IPv4Address]] | None = None
    """For an IPv6 entry that wraps IPv4: the IPv4 addresses an address of it carries (judged instead)."""

    def __repr__(self) -> str:
        return f"Block({self.network}, {self.name!r})"


def _v4(prefix: str, name: str, rfc: str, reachable: bool | None) -> Block:
    return Block(ipaddress.IPv4Network(prefix), name, rfc, reachable)


def _v6(prefix: str, name: str, rfc: str, reachable: bool | None, embedded=None) -> Block:
    return Block(ipaddress.IPv6Network(prefix), name, rfc, reachable, embedded)


def _mapped(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    return [ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)]


def _sixtofour(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    return [ipaddress.IPv4Address((int(ip) >> 80) & 0xFFFFFFFF)]


def _teredo(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The Teredo server (bits 32-63) and the client, stored inverted in the last 32 bits."""
    value = int(ip)
    return [ipaddress.IPv4Address((value >> 64) & 0xFFFFFFFF), ipaddress.IPv4Address(~value & 0xFFFFFFFF)]


IPV4_SPECIAL_PURPOSE: tuple[Block, ...] = (
    _v4("0.0.0.0/8", "this network", "RFC 791", False),
    _v4("0.0.0.0/32", "this host on this network", "RFC 1122", False),
    _v4("10.0.0.0/8", "private-use", "RFC 1918", False),
    _v4("100.64.0.0/10", "shared address space (carrier-grade NAT)", "RFC 6598", False),
    _v4("127.0.0.0/8", "loopback", "RFC 1122", False),
    _v4("169.254.0.0/16", "link-local (cloud metadata)", "RFC 3927", False),
    _v4("172.16.0.0/12", "private-use", "RFC 1918", False),
    _v4("192.0.0.0/24", "IETF protocol assignments", "RFC 6890", False),
    _v4("192.0.0.0/29", "IPv4 service continuity prefix", "RFC 7335", False),
    _v4("192.0.0.8/32", "IPv4 dummy address", "RFC 7600", False),
    _v4("192.0.0.9/32", "Port Control Protocol anycast", "RFC 7723", True),
    _v4("192.0.0.10/32", "TURN anycast", "RFC 8155", True),
    _v4("192.0.0.170/32", "NAT64/DNS64 discovery", "RFC 8880", False),
    _v4("192.0.0.171/32", "NAT64/DNS64 discovery", "RFC 8880", False),
    _v4("192.0.2.0/24", "documentation (TEST-NET-1)", "RFC 5737", False),
    _v4("192.31.196.0/24", "AS112-v4", "RFC 7535", True),
    _v4("192.52.193.0/24", "AMT", "RFC 7450", True),
    _v4("192.88.99.0/24", "deprecated 6to4 relay anycast", "RFC 7526", None),
    _v4("192.88.99.2/32", "6a44 relay anycast", "RFC 6751", False),
    _v4("192.168.0.0/16", "private-use", "RFC 1918", False),
    _v4("192.175.48.0/24", "direct delegation AS112 service", "RFC 7534", True),
    _v4("198.18.0.0/15", "benchmarking", "RFC 2544", False),
    _v4("198.51.100.0/24", "documentation (TEST-NET-2)", "RFC 5737", False),
    _v4("203.0.113.0/24", "documentation (TEST-NET-3)", "RFC 5737", False),
    _v4("240.0.0.0/4", "reserved", "RFC 1112", False),
    _v4("255.255.255.255/32", "limited broadcast", "RFC 919", False),
)
"""The IANA IPv4 Special-Purpose Address Registry."""

IPV4_NOT_UNICAST: tuple[Block, ...] = (
    _v4("224.0.0.0/4", "multicast", "RFC 5771", False),
)
"""Blocks of the IANA IPv4 Address Space registry that are not unicast (the rest of it is public unicast
once the special-purpose entries are taken out)."""

IPV6_SPECIAL_PURPOSE: tuple[Block, ...] = (
    _v6("::1/128", "loopback", "RFC 4291", False),
    _v6("::/128", "unspecified", "RFC 4291", False),
    _v6("::ffff:0:0/96", "IPv4-mapped", "RFC 4291", False, _mapped),
    _v6("64:ff9b::/96", "IPv4-IPv6 translation (NAT64)", "RFC 6052", True, _mapped),
    _v6("64:ff9b:1::/48", "local-use IPv4/IPv6 translation", "RFC 8215", False),
    _v6("100::/64", "discard-only", "RFC 6666", False),
    _v6("100:0:0:1::/64", "dummy IPv6 prefix", "RFC 9780", False),
    _v6("2001::/23", "IETF protocol assignments", "RFC 2928", False),
    _v6("2001::/32", "Teredo", "RFC 4380", None, _teredo),
    _v6("2001:1::1/128", "Port Control Protocol anycast", "RFC 7723", True),
    _v6("2001:1::2/128", "TURN anycast", "RFC 8155", True),
    _v6("2001:1::3/128", "DNS-SD service registration protocol anycast", "RFC 9665", True),
    _v6("2001:2::/48", "benchmarking", "RFC 5180", False),
    _v6("2001:3::/32", "AMT", "RFC 7450", True),
    _v6("2001:4:112::/48", "AS112-v6", "RFC 7535", True),
    _v6("2001:10::/28", "deprecated ORCHID", "RFC 4843", None),
    _v6("2001:20::/28", "ORCHIDv2", "RFC 7343", True),
    _v6("2001:30::/28", "drone remote ID protocol entity tags", "RFC 9374", True),
    _v6("2001:db8::/32", "documentation", "RFC 3849", False),
    _v6("2002::/16", "6to4", "RFC 3056", None, _sixtofour),
    _v6("2620:4f:8000::/48", "direct delegation AS112 service", "RFC 7534", True),
    _v6("3fff::/20", "documentation", "RFC 9637", False),
    _v6("5f00::/16", "segment routing (SRv6) SIDs", "RFC 9602", False),
    _v6("fc00::/7", "unique-local", "RFC 4193", False),
    _v6("fe80::/10", "link-local", "RFC 4291", False),
)
"""The IANA IPv6 Special-Purpose Address Registry."""

IPV6_GLOBAL_UNICAST = ipaddress.IPv6Network("2000::/3")
"""The only IPv6 space the IANA IPv6 Address Space registry allocates as global unicast."""


def parse_address(text: str) -> IPAddress:
    """An address as a resolver returns it; an IPv6 zone (`fe80::1%eth0`) is dropped (link-local anyway).
    Raises ValueError for anything that is not an address."""
    return ipaddress.ip_address(text.split("%", 1)[0])


def refusal(address: IPAddress) -> str | None:
    """Why connecting to `address` could reach a non-public network (a registry entry's name; for a wrapping
    form, what it wraps), or None when it is public unicast."""
    if isinstance(address, ipaddress.IPv4Address):
        return _ipv4_refusal(address)
    block = _most_specific(IPV6_SPECIAL_PURPOSE, address)
    if block is not None and block.embedded is not None:
        for inner in block.embedded(address):
            why = _ipv4_refusal(inner)
            if why is not None:
                return f"{block.name} wrapping a {why} address"
        return None  # a wrapping form goes where the public IPv4 address it carries goes
    if address not in IPV6_GLOBAL_UNICAST:
        return "outside IPv6 global unicast 2000::/3 (" + _ipv6_space_name(address) + ")"
    if block is not None and block.embedded is None and block.globally_reachable is not True:
        return block.name
    return None


def _ipv4_refusal(address: ipaddress.IPv4Address) -> str | None:
    block = _most_specific(IPV4_SPECIAL_PURPOSE + IPV4_NOT_UNICAST, address)
    if block is None or block.globally_reachable is True:
        return None
    return block.name


def _most_specific(blocks: tuple[Block, ...], address: IPAddress) -> Block | None:
    best = None
    for block in blocks:
        if address in block.network and (best is None or block.network.prefixlen > best.network.prefixlen):
            best = block
    return best


def _ipv6_space_name(address: ipaddress.IPv6Address) -> str:
    """The IANA IPv6 Address Space registry's name for a block outside 2000::/3, for the refusal message."""
    for prefix, name in (("::1/128", "loopback"), ("::/128", "unspecified"), ("::/96", "IPv4-compatible"),
                         ("fc00::/7", "unique-local"), ("fe80::/10", "link-local"),
                         ("fec0::/10", "site-local, deprecated"), ("ff00::/8", "multicast")):
        if address in ipaddress.IPv6Network(prefix):
            return name
    return "reserved by the IETF"
