"""HOST:PORT text to ccoip_socket_address_t."""
from ipaddress import IPv4Address, ip_address

from pccl._native import ffi, lib


def socket_address(text, what):
    """A new ccoip_socket_address_t* for "IP:PORT" ("[IPv6]:PORT" for IPv6; no host names).

    Raises TypeError if `text` is not a str, ValueError if it is not an IP literal and a port in [0, 65535].
    """
    if not isinstance(text, str):
        raise TypeError(f"{what} must be a str 'IP:PORT', not {text!r}")
    host, sep, port = text.rpartition(":")
    try:
        ip = ip_address(host[1:-1] if host.startswith("[") and host.endswith("]") else host)
        port = int(port)
    except ValueError:
        ip = None
    if not sep or ip is None or not 0 <= port <= 65535:
        raise ValueError(f"{what} must be 'IP:PORT' with an IP address and a port in [0, 65535], got {text!r}")
    addr = ffi.new("ccoip_socket_address_t *")
    if isinstance(ip, IPv4Address):
        addr.inet.protocol = lib.inetIPv4
        addr.inet.ipv4.data = list(ip.packed)
    else:
        addr.inet.protocol = lib.inetIPv6
        addr.inet.ipv6.data = list(ip.packed)
    addr.port = port
    return addr
