import PushFleetServerSupport
import Testing

/// `serve`'s loop count is read from its arguments before they are parsed: what the flag asks
/// when it is in range, else the default of one loop for every two cores.
@Suite("Server event loops")
struct ServerEventLoopsTests {
    @Test("one loop for every two cores, at least one")
    func defaults() {
        #expect([1, 2, 3, 4, 16, 64].map { ServerEventLoops.defaultCount(cores: $0) } == [1, 1, 1, 2, 8, 32])
        #expect(ServerEventLoops.defaultCount(cores: 0) == 1)
        #expect(ServerEventLoops.count(arguments: ["--backend-listen", "127.0.0.1:0"], cores: 8) == 4)
    }

    @Test("the flag's value, as a separate argument or after '=', the last one given winning")
    func flag() {
        #expect(ServerEventLoops.count(arguments: ["--event-loops", "3"], cores: 2) == 3)
        #expect(ServerEventLoops.count(arguments: ["--log-level", "info", "--event-loops=6"], cores: 2) == 6)
        #expect(ServerEventLoops.count(arguments: ["--event-loops", "3", "--event-loops", "5"], cores: 2) == 5)
    }

    @Test("a value out of range or not a number leaves the default (the parser refuses it afterwards)")
    func badValues() {
        for bad in [["--event-loops", "0"], ["--event-loops", "1025"], ["--event-loops", "-2"], ["--event-loops=two"], ["--event-loops"], ["--event-loops="], ["--event-loops", "99999999999999999999"], ["--event-loops", " 3"]] {
            #expect(ServerEventLoops.count(arguments: bad, cores: 4) == 2, "\(bad)")
        }
    }

    @Test("a value after '--' is not the flag's")
    func afterTerminator() {
        #expect(ServerEventLoops.count(arguments: ["--", "--event-loops", "7"], cores: 2) == 1)
    }
}
