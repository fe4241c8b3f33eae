"""The address policy against every entry of IANA's IPv4 and IPv6 Special-Purpose Address Registries.

The registries are written out again here, as the test's own oracle (prefix and "Globally
Reachable"), so an edit of the policy's tables that drops or flips an entry fails. Each entry's
first and last address is checked; the IPv6 forms that carry an IPv4 address are checked with
every refused IPv4 entry inside them. Nothing here opens a connection.
"""

from __future__ import annotations

import ipaddress

import pytest

from maya_server.images.address_policy import (IPV4_NOT_UNICAST, IPV4_SPECIAL_PURPOSE, IPV6_SPECIAL_PURPOSE,
                                        parse_address, refusal)

IPV4_REGISTRY = {  # prefix: globally reachable (None: the registry says N/A)
    "0.0.0.0/8": False, "0.0.0.0/32": False, "10.0.0.0/8": False, "100.64.0.0/10": False,
    "127.0.0.0/8": False, "169.254.0.0/16": False, "172.16.0.0/12": False, "192.0.0.0/24": False,
    "192.0.0.0/29": False, "192.0.0.8/32": False, "192.0.0.9/32": True, "192.0.0.10/32": True,
    "192.0.0.170/32": False, "192.0.0.171/32": False, "192.0.2.0/24": False, "192.31.196.0/24": True,
    "192.52.193.0/24": True, "192.88.99.0/24": None, "192.88.99.2/32": False, "192.168.0.0/16": False,
    "192.175.48.0/24": True, "198.18.0.0/15": False, "198.51.100.0/24": False, "203.0.113.0/24": False,
    "240.0.0.0/4": False, "255.255.255.255/32": False,
}
IPV6_REGISTRY = {
    "::1/128": False, "::/128": False, "::ffff:0:0/96": False, "64:ff9b::/96": True, "64:ff9b:1::/48": False,
    "100::/64": False, "100:0:0:1::/64": False, "2001::/23": False, "2001::/32": None, "2001:1::1/128": True,
    "2001:1::2/128": True, "2001:1::3/128": True, "2001:2::/48": False, "2001:3::/32": True,
    "2001:4:112::/48": True, "2001:10::/28": None, "2001:20::/28": True, "2001:30::/28": True,
    "2001:db8::/32": False, "2002::/16": None, "2620:4f:8000::/48": True, "3fff::/20": False,
    "5f00::/16": False, "fc00::/7": False, "fe80::/10": False,
}
WRAPPERS = {"::ffff:0:0/96", "64:ff9b::/96", "2001::/32", "2002::/16"}
"""Judged by the IPv4 addresses they carry, not by their own column."""


def edges(prefix: str) -> list[str]:
    network = ipaddress.ip_network(prefix)
    return sorted({str(network.network_address), str(network.broadcast_address)})


def test_the_tables_are_the_registries():
    assert {str(b.network): b.globally_reachable for b in IPV4_SPECIAL_PURPOSE} == IPV4_REGISTRY
    assert {str(b.network): b.globally_reachable for b in IPV6_SPECIAL_PURPOSE} == IPV6_REGISTRY
    assert {str(b.network) for b in IPV6_SPECIAL_PURPOSE if b.embedded} == WRAPPERS
    assert [str(b.network) for b in IPV4_NOT_UNICAST] == ["224.0.0.0/4"]


@pytest.mark.parametrize("prefix, address", [(p, a) for p in IPV4_REGISTRY for a in edges(p)])
def test_every_ipv4_entry(prefix, address):
    """Refused unless the most specific entry holding the address is globally reachable."""
    holding = [p for p in IPV4_REGISTRY if ipaddress.ip_address(address) in ipaddress.ip_network(p)]
    most_specific = max(holding, key=lambda p: ipaddress.ip_network(p).prefixlen)
    allowed = IPV4_REGISTRY[most_specific] is True
    assert (refusal(parse_address(address)) is None) == allowed, (prefix, address, most_specific)


@pytest.mark.parametrize("prefix, address", [(p, a) for p in IPV6_REGISTRY if p not in WRAPPERS
                                             for a in edges(p)])
def test_every_ipv6_entry(prefix, address):
    holding = [p for p in IPV6_REGISTRY if ipaddress.ip_address(address) in ipaddress.ip_network(p)]
    most_specific = max(holding, key=lambda p: ipaddress.ip_network(p).prefixlen)
    if most_specific in WRAPPERS:  # 2001::/23's first address is Teredo's, carrying 0.0.0.0
        assert refusal(parse_address(address)) is not None
        return
    allowed = IPV6_REGISTRY[most_specific] is True and ipaddress.ip_address(address) in ipaddress.ip_network("2000::/3")
    assert (refusal(parse_address(address)) is None) == allowed, (prefix, address)


REFUSED_IPV4 = [a for p, reachable in IPV4_REGISTRY.items() if reachable is not True for a in edges(p)
                if not any(ipaddress.ip_address(a) in ipaddress.ip_network(q)
                           for q, r in IPV4_REGISTRY.items() if r is True)] + ["224.0.0.1", "239.255.255.255"]
PUBLIC_IPV4 = ["8.8.8.8", "93.184.216.34", "1.1.1.1", "192.0.0.9", "192.31.196.1"]


def wrapped(kind: str, v4: str) -> str:
    value = int(ipaddress.IPv4Address(v4))
    public = int(ipaddress.IPv4Address("93.184.216.34"))
    forms = {
        "mapped": (0xFFFF << 32) | value,
        "nat64": (0x64FF9B << 96) | value,
        "6to4": (0x2002 << 112) | (value << 80) | 1,
        "teredo client": (0x20010000 << 96) | (public << 64) | (~value & 0xFFFFFFFF),
        "teredo server": (0x20010000 << 96) | (value << 64) | (~public & 0xFFFFFFFF),
    }
    return str(ipaddress.IPv6Address(forms[kind]))


KINDS = ["mapped", "nat64", "6to4", "teredo client", "teredo server"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("v4", REFUSED_IPV4)
def test_a_wrapped_non_public_ipv4_is_refused(kind, v4):
    assert refusal(parse_address(wrapped(kind, v4))) is not None


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("v4", PUBLIC_IPV4)
def test_a_wrapped_public_ipv4_goes_where_it_goes(kind, v4):
    assert refusal(parse_address(wrapped(kind, v4))) is None


@pytest.mark.parametrize("address", [
    "2002:a9fe:a9fe::", "100.100.100.200", "100.64.0.1", "100.127.255.255", "192.0.0.200", "fec0::1",
    "feff:ffff::1", "ff02::1", "ff0e::1", "::10.0.0.1", "::8.8.8.8", "::2", "4000::1", "fe80::1%eth0",
    "64:ff9b::a00:1", "64:ff9b:1::8.8.8.8", "::ffff:169.254.169.254", "fd00:ec2::254",
])
def test_the_ranges_pythons_flags_miss_are_refused(address):
    assert refusal(parse_address(address)) is not None


@pytest.mark.parametrize("address", ["8.8.8.8", "2606:4700:4700::1111", "2a00:1450:4001::1", "100.128.0.1",
                                     "100.63.255.255", "192.0.1.1", "2001:4860::8888"])
def test_public_unicast_is_allowed(address):
    assert refusal(parse_address(address)) is None


def test_a_refusal_names_the_entry_not_the_address():
    why = refusal(parse_address("2002:a9fe:a9fe::"))
    assert why == "6to4 wrapping a link-local (cloud metadata) address"
    assert "169.254" not in why


@pytest.mark.parametrize("address, reason", [
    ("127.0.0.1", "loopback"),
    ("10.1.2.3", "private-use"),
    ("169.254.169.254", "link-local (cloud metadata)"),
    ("100.64.0.1", "shared address space (carrier-grade NAT)"),
    ("0.0.0.0", "this host on this network"),
    ("224.0.0.1", "multicast"),
    ("2001:db8::1", "documentation"),
    ("2001:2::1", "benchmarking"),
    ("::1", "outside IPv6 global unicast 2000::/3 (loopback)"),
    ("fd00:ec2::254", "outside IPv6 global unicast 2000::/3 (unique-local)"),
    ("fec0::1", "outside IPv6 global unicast 2000::/3 (site-local, deprecated)"),
    ("::ffff:127.0.0.1", "IPv4-mapped wrapping a loopback address"),
    ("64:ff9b::a00:1", "IPv4-IPv6 translation (NAT64) wrapping a private-use address"),
    ("2002:c0a8:101::1", "6to4 wrapping a private-use address"),
])
def test_a_refusal_says_which_entry_refused_it(address, reason):
    """The reason is what the 400 tells the client: the registry entry's name, and for a wrapping form, what it
    wraps. One case for each branch of the policy, and the common ones a client will meet."""
    assert refusal(parse_address(address)) == reason


@pytest.mark.parametrize("prefix, address", [(p, a) for p in IPV4_REGISTRY for a in edges(p)])
def test_every_refused_ipv4_entry_is_named_by_its_most_specific_block(prefix, address):
    block = max((b for b in IPV4_SPECIAL_PURPOSE if ipaddress.ip_address(address) in b.network),
                key=lambda b: b.network.prefixlen)
    if block.globally_reachable is not True:
        assert refusal(parse_address(address)) == block.name, (prefix, address)
