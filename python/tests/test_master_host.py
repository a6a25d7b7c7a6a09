"""A master named by a host name: the package hands the name to the library (pcclExtCommSetMasterHost), which tries
every address getaddrinfo gives until one connects. The child process runs in a private mount namespace whose
/etc/hosts gives one name 127.0.0.1 and ::1, so nothing changes for the rest of the machine; the master listens on
[::1] only, so the package's own resolution (its first IPv4 address) would be refused."""
import shutil
import socket
import subprocess
import sys

import pytest

from harness import child_env, free_port

CODE = """
import pccl
m = pccl.MasterNode("[::1]:{port}"); m.run()
c = pccl.Communicator("pccl-two-addresses:{port}")
try:
    c.connect(n_attempts=1, timeout_s=20)
    print("joined", c.get_attribute(pccl.Attribute.GLOBAL_WORLD_SIZE))
finally:
    c.close()
    m.interrupt()
"""


def _private_hosts_usable():
    if shutil.which("unshare") is None:
        return False
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
    except OSError:
        return False
    return subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode == 0


@pytest.mark.skipif(not _private_hosts_usable(), reason="needs ::1 and a private mount namespace (unshare -m, root)")
def test_every_address_of_the_master_name_is_tried(tmp_path):
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 pccl-two-addresses\n::1 pccl-two-addresses\n")
    script = ('mount --bind "$1" /etc/hosts && shift && getent ahosts pccl-two-addresses >&2 && exec "$@"')
    p = subprocess.run(["unshare", "-m", "sh", "-c", script, "sh", str(hosts), sys.executable, "-c",
                        CODE.format(port=free_port())], capture_output=True, text=True, timeout=60, env=child_env())
    assert "127.0.0.1" in p.stderr and "::1" in p.stderr, p.stderr  # the name has both addresses
    assert (p.returncode, p.stdout.strip()) == (0, "joined 1"), p.stderr


def test_names_and_literals():
    from pccl._address import is_host_name
    assert is_host_name("localhost:1") and is_host_name("master.example:48148")
    assert not is_host_name("127.0.0.1:1") and not is_host_name("[::1]:1") and not is_host_name("[::]:1")
