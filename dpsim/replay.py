"""The fast path: steps simulated once and replayed, and who has the network meanwhile.

A collective made of identical rounds (the 2(n-1) steps of a ring), or a step seen before, takes
a time and moves bytes that depend on its own transfers alone, as long as nothing else is on
the network. So the first time is simulated in detail and remembered, and every later time is
one wait of that length, with the same bytes booked when the wait ends.

That is exact (up to floating-point rounding) when
  - the network is idle when the step, or the first of the rounds, starts (nothing in flight), and
  - no other process sends while it runs.
The first is checked before a replay is taken (`idle`, `may_replay`). The second is checked as
it happens: while a step is recorded or replayed, its process owns the network, and the
network's observer hook (Network.observer) reports every transfer started; one started by any
other process marks the run `disturbed`, and the engine then reruns the whole simulation on
the detailed path (Engine.settled). Stragglers do not matter: a collective starts when the
slowest GPU is ready and its rounds involve no compute.

Three kinds of replay:
  rounds      Machine.repeat: the first of k identical rounds simulated, the other k - 1 one wait
  step        Machine.send: a step simulated the first time, replayed when it comes again;
              its bytes owed (dpsim.ledger) until they are read
  symmetric   Machine.send of a step whose nodes all do the same thing (an all-to-all, a ring
              step, a parameter server's gather): timed by dpsim.symmetry one flow per kind,
              then replayed; its bytes are owed (dpsim.ledger) until they are read
"""
from .duet import Duet
from .ledger import Ledger, Replayed, book
from .network import Sending


class Replay:
    """The fast path's memory and the network's ownership, for one simulation."""

    def __init__(self, env, net, cluster):
        self.env, self.net = env, net
        self.ledger = Ledger(net, cluster)    # bytes of symmetric steps, booked when read
        self.owner = None           # the process that has the network to itself
        self.log = None             # the network.Sending of every step started while a step is recorded,
                                    # and the Tally or Replayed of each step replayed meanwhile
        self.disturbed = False      # another process sent while a replay owned the network
        self.steps = {}             # remembered steps: key -> (seconds, book), book() books its bytes
        self.replayed = 0           # rounds and steps replayed instead of simulated
        self.symmetric_steps = 0    # steps simulated one flow per kind (dpsim.symmetry)
        self.duet = Duet(env, self._book_train)     # ring collectives timed together (dpsim.duet)
        net.observer = self._saw

    def _saw(self, sending):
        """The network's observer: the transfers of a network.Sending have started."""
        if self.owner is not None and self.env.active_process is not self.owner or self.duet.active:
            self.disturbed = True
        if self.log is not None:
            self.log.append(sending)

    def idle(self) -> bool:
        """Nothing in flight and nobody replaying: a collective starting now has the network alone."""
        return self.net.in_flight == 0 and self.owner is None and not self.duet.active

    def may_replay(self) -> bool:
        """A step started now by the running process would have the network to itself."""
        me = self.env.active_process
        return me is not None and self.net.in_flight == 0 and self.owner in (None, me) and not self.duet.active

    def rounds(self, rounds, step):
        """`step()`, a generator for one round, simulated once; the other rounds - 1 are one
        wait of (rounds - 1) x its duration, their bytes booked when it ends. Call it only when
        `idle()`."""
        env = self.env
        start = env.now
        self.owner, self.log = env.active_process, []
        yield from step()
        log, self.log = self.log, None
        yield env.timeout((rounds - 1) * (env.now - start))
        self.owner = None
        self._count_again(log, rounds - 1)
        self.replayed += rounds - 1

    def step(self, key, simulate):
        """A step: one wait of its remembered time if it was seen before, else `simulate()` (an
        event), recorded with its process owning the network. Inside a round that `rounds` is
        recording, the step's transfers join that round's log."""
        if key in self.steps:
            return self._wait(*self.steps[key])
        env = self.env
        outer_owner, outer_log = self.owner, self.log
        self.owner, self.log = env.active_process, []
        start, done = env.now, simulate()

        def finish(_):
            log = self.log
            if not self.disturbed:
                replayed = Replayed(log)
                self.steps[key] = (env.now - start, lambda: self._book_step(replayed))
            if outer_log is not None:
                outer_log.extend(log)
            self.owner, self.log = outer_owner, outer_log
        done.callbacks.append(finish)
        return done

    def symmetric(self, key, measure):
        """A step whose nodes all do the same thing: measure() -> (seconds, Tally) the first
        time (dpsim.symmetry), then one wait of those seconds, its bytes owed at its end."""
        if key not in self.steps:
            seconds, tally = measure()
            self.symmetric_steps += 1
            self.steps[key] = (seconds, lambda: self._book_tally(tally))
        return self._wait(*self.steps[key])

    def _wait(self, seconds, book):
        """One wait of `seconds` standing in for a step, its process owning the network meanwhile
        (so anyone else's transfer shows as `disturbed`); `book()` books the step's bytes at the end."""
        outer_owner, self.owner = self.owner, self.env.active_process
        self.replayed += 1
        done = self.env.timeout(seconds)

        def finish(_):
            book()
            self.owner = outer_owner
        done.callbacks.append(finish)
        return done

    # -- booking the bytes of what was not simulated
    def _count_again(self, log, times):
        """Book the bytes of the logged transfers `times` more times; owe those of the symmetric
        and remembered steps replayed among them (dpsim.ledger)."""
        for entry in log:
            if isinstance(entry, Sending):
                book(self.net, entry.transfers(), times)
            else:
                self.ledger.owe(entry, times)

    def _book_step(self, replayed):
        """A remembered step replayed once: its bytes owed (dpsim.ledger), O(1) however many
        transfers it has, and, inside a round being recorded, owed again with the round."""
        self.ledger.owe(replayed)
        if self.log is not None:
            self.log.append(replayed)

    def _book_train(self, train):
        """A dpsim.duet train has ended: the bytes of its steps owed, its steps counted as replayed."""
        self.ledger.owe(train.tally, train.count)
        self.replayed += train.count

    def _book_tally(self, tally):
        self.ledger.owe(tally)
        if self.log is not None:
            self.log.append(tally)
