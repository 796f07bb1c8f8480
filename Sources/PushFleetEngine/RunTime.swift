import PushFleetCore

/// The run's clock: every instant of the run is read from it, and every wait made on it.
struct RunTime: Sendable {
    let clock: any RunClock
    /// The run's first instant on `clock`.
    let start: Int64
    /// The run's clock less the wall clock, read once: moves the push service's wall-clock
    /// instants (frames, reports) onto the run's clock.
    let wallOffset: Int64

    init(clock: any RunClock, start: Int64) {
        self.clock = clock
        self.start = start
        self.wallOffset = clock.now() - clock.wallNow()
    }

    func now() -> Int64 { clock.now() }

    /// A wall-clock instant of the push service's, on the run's clock (``ForeignInstant``).
    func onRunClock(wall instant: Int64) -> Int64 {
        ForeignInstant.onRunClock(wall: instant, offset: wallOffset, start: start, now: now())
    }
}
