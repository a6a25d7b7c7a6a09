"""HOST:PORT text to ccoip_socket_address_t."""
import socket
from ipaddress import IPv4Address, ip_address

from pccl._native import ffi, lib


def _resolve(host):
    """The address a host name resolves to, IPv4 first (as the C library's addr.c); None if it does not."""
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        return None
    for family in (socket.AF_INET, socket.AF_INET6):
        for info in infos:
            if info[0] == family:
                return ip_address(info[4][0].split("%")[0])
    return None


def is_host_name(text):
    """Whether "HOST:PORT" names its host (rather than giving an IPv4 or a bracketed IPv6 address)."""
    host = text.rpartition(":")[0]
    if host.startswith("["):
        return False
    try:
        ip_address(host)
        return False
    except ValueError:
        return True


def socket_address(text, what):
    """A new ccoip_socket_address_t* for "HOST:PORT": an IPv4 address, "[IPv6]:PORT", or a host name
    (resolved with getaddrinfo, its first IPv4 address when it has one: an address to bind; Communicator hands a
    name to the library, which dials each of its addresses).

    Raises TypeError if `text` is not a str, ValueError if it has no port in [0, 65535] or the host does
    not resolve.
    """
    if not isinstance(text, str):
        raise TypeError(f"{what} must be a str 'IP:PORT' or 'HOST:PORT', not {text!r}")
    host, sep, port = text.rpartition(":")
    bracketed = host.startswith("[") and host.endswith("]")
    try:
        port = int(port)
    except ValueError:
        port = -1
    if not sep or not host or not 0 <= port <= 65535:
        raise ValueError(f"{what} must be 'IP:PORT' or 'HOST:PORT' with a port in [0, 65535], got {text!r}")
    try:
        ip = ip_address(host[1:-1] if bracketed else host)
    except ValueError:
        ip = None if bracketed else _resolve(host)
    if ip is None:
        raise ValueError(f"{what} must be 'IP:PORT' or 'HOST:PORT' with a host that resolves, got {text!r}")
    addr = ffi.new("ccoip_socket_address_t *")
    if isinstance(ip, IPv4Address):
        addr.inet.protocol = lib.inetIPv4
        addr.inet.ipv4.data = list(ip.packed)
    else:
        addr.inet.protocol = lib.inetIPv6
        addr.inet.ipv6.data = list(ip.packed)
    addr.port = port
    return addr
