"""What the training wrappers share: the communicator, the retry policy and the step prologue ("begin").

begin() runs between steps, with no collective in flight: update the topology (accept newcomers, drop the gone),
wait until the run has min_world peers, synchronize the shared state. A retryable failure starts begin() over;
a fatal one, too many failures in a row, or the deadline raise.
"""
import logging
import time
from dataclasses import dataclass
from typing import Optional

from pccl._comm import Communicator
from pccl._enums import Attribute
from pccl._errors import RETRYABLE_RESULTS, PCCLError, Result

log = logging.getLogger("pccl.train")

# Failures that peers heal by starting the step over: a peer left or could not be reached, the world changed under
# a vote, or the peers were briefly out of lockstep (the master then fails every blocked vote with INVALID_USAGE,
# which is why INVALID_USAGE is retried a bounded number of times instead of raised at once).
RETRYABLE = RETRYABLE_RESULTS | {Result.INVALID_USAGE}
_POLL_S = 0.05


def is_retryable(error: PCCLError) -> bool:
    """True when starting the step over can heal `error` (by its result code, never its text). Fatal: the master is
    gone (MASTER_CONNECTION_FAILED), the run was shut down or this peer kicked (RUN_SHUT_DOWN), a bad argument,
    an internal error, operations still pending."""
    return error.result in RETRYABLE


@dataclass
class TrainStats:
    """Counters of a wrapper. committed / skipped: synchronizations (all-reduces) applied on every peer / skipped on
    every peer; state_tx_bytes / state_rx_bytes: shared-state payload bytes sent / received; first_revision: the
    revision after this peer's first sync (above 0 for a peer that joined a running run); world_size: peers in the
    last all-reduce (or the last topology when none ran yet); retries: failed prologues started over; waits: topology
    updates a prologue made while the run was not ready (fewer than min_world peers, or ready() False)."""
    committed: int = 0
    skipped: int = 0
    state_tx_bytes: int = 0
    state_rx_bytes: int = 0
    first_revision: Optional[int] = None
    world_size: int = 0
    retries: int = 0
    waits: int = 0


class Session:
    """A connected communicator plus the step prologue.

    comm: a Communicator that connect() just returned (this peer's first topology update is then skipped: the
    run accepted it inside the other peers' update), or an address 'HOST:PORT' to create and connect one.
    min_world: peers to wait for before this peer's first step; later steps go on with any 2 (the library's
    all-reduce needs 2), or alone when min_world is 1.
    timeout_s: deadline of one begin() (waiting for peers included); max_failures: retryable failures in a row
    before the last one is raised.
    ready: a callable asked after each topology update (after min_world is met); begin() syncs only once it returns
    True, else updates the topology again. It must answer alike on every peer (e.g. from the run-wide attributes:
    pccl.train.grid.grid_full), since every accepted peer takes part in every topology update.
    """

    def __init__(self, comm, state, *, min_world=2, timeout_s=300.0, max_failures=50, peer_group=0,
                 connect_attempts=15, ready=None):
        if isinstance(comm, str):
            comm_obj = Communicator(comm, peer_group=peer_group, p2p_connection_pool_size=1)
            comm_obj.connect(n_attempts=connect_attempts)
            comm = comm_obj
        if not isinstance(comm, Communicator):
            raise TypeError(f"comm must be a pccl.Communicator or an address string, not {comm!r}")
        if min_world < 1:
            raise ValueError(f"min_world must be >= 1, got {min_world}")
        self.comm = comm
        self.state = state
        self.min_world = min_world
        self.timeout_s = timeout_s
        self.max_failures = max_failures
        self.stats = TrainStats()
        self._just_connected = True
        self._ready = ready

    @property
    def revision(self) -> int:
        return self.state.revision

    def world_size(self) -> int:
        return self.comm.get_attribute(Attribute.GLOBAL_WORLD_SIZE)

    def failed(self, error: PCCLError, what: str):
        """Re-raises a fatal `error`; counts and logs a retryable one."""
        if not is_retryable(error):
            raise error
        self.stats.retries += 1
        log.info("%s failed (%s); starting the step over", what, error.result.name)

    def begin(self, on_synced=None):
        """Topology update, wait for min_world peers, shared-state sync. on_synced(rx_bytes) runs after each
        successful sync (the wrapper resets what depends on received state). Raises PCCLError (fatal, or
        max_failures retryable ones in a row), TimeoutError past timeout_s."""
        deadline = time.monotonic() + self.timeout_s
        failures = 0
        while True:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no step could begin within {self.timeout_s} s "
                                   f"(world size {self.world_size()}, min_world {self.min_world})")
            try:
                if not self._just_connected:
                    self.comm.update_topology()
                self._just_connected = False
                world = self.world_size()
                if world < self.min_world or (self._ready is not None and not self._ready()):
                    self.stats.waits += 1
                    time.sleep(_POLL_S)
                    continue
                tx, rx = self.state.sync(self.comm)
            except PCCLError as e:
                failures += 1
                if failures >= self.max_failures:
                    raise
                self.failed(e, "step prologue")
                time.sleep(_POLL_S)
                continue
            self.stats.state_tx_bytes += tx
            self.stats.state_rx_bytes += rx
            self.stats.world_size = world
            if self.stats.first_revision is None:
                self.stats.first_revision = self.state.revision
                self.min_world = min(self.min_world, 2)
            if on_synced is not None:
                on_synced(rx)
            return rx

    def conclude(self, committed: bool, apply) -> bool:
        """Ends a step alike on every peer: on commit apply() (the optimizer step) and revision + 1, else counted as
        skipped; then the next prologue. Returns committed."""
        if committed:
            apply()
            self.state.revision += 1
            self.stats.committed += 1
        else:
            self.stats.skipped += 1
        self.begin()
        return committed
