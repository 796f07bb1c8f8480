import PushFleetCore
import Testing

@Suite("Live page subscribers")
struct LiveSubscribersTests {
    @Test("a joiner gets the opening, the history and then what is published; a full queue drops only its subscriber")
    func boundedQueues() {
        var subscribers = LiveSubscribers<String>(capacity: 2, historyLimit: 3)
        let early = subscribers.join()
        let told = subscribers.open("hello")
        // One that joined before the opening is told it when it comes.
        if case .write(let id, let message) = told.first { #expect(told.count == 1 && id == early.id && message == "hello") } else { Issue.record("\(told)") }
        subscribers.leave(early.id)
        for frame in ["f1", "f2", "f3", "f4"] { _ = subscribers.publish(frame) }
        let fast = subscribers.join()
        #expect(fast.backlog == ["hello", "f2", "f3", "f4"] && !fast.finished)
        let slow = subscribers.join()
        // The fast one writes each frame as it comes; the slow one never does.
        for frame in ["f5", "f6"] {
            let actions = subscribers.publish(frame)
            #expect(actions.count == 2)
            subscribers.written(fast.id)
        }
        let third = subscribers.publish("f7")
        #expect(third.count == 2)
        guard case .write(let written, let message) = third[0], case .drop(let dropped) = third[1] else {
            Issue.record("\(third)")
            return
        }
        #expect(written == fast.id && message == "f7" && dropped == slow.id && subscribers.subscribers == 1)
        // Dropped for good: nothing more is written to it.
        subscribers.written(fast.id)
        #expect(subscribers.publish("f8").count == 1)
        subscribers.leave(fast.id)
        #expect(subscribers.publish("f9").isEmpty && subscribers.subscribers == 0)
    }

    @Test("the closing message reaches every subscriber, a full one too, and finishes each; a later joiner gets the history and it")
    func closing() {
        var subscribers = LiveSubscribers<String>(capacity: 1, historyLimit: 2)
        let a = subscribers.join()
        let b = subscribers.join()
        _ = subscribers.publish("f1")
        subscribers.written(a.id)
        let actions = subscribers.close("verdict")
        #expect(actions.count == 4 && subscribers.subscribers == 0)
        if case .write(let id, let message) = actions[2], case .finish(let finished) = actions[3] {
            #expect(id == b.id && message == "verdict" && finished == b.id)
        } else {
            Issue.record("\(actions)")
        }
        let late = subscribers.join()
        #expect(late.backlog == ["f1", "verdict"] && late.finished && subscribers.subscribers == 0)
    }

    @Test("the history keeps its last messages however many are published")
    func historyIsBounded() {
        var subscribers = LiveSubscribers<Int>(capacity: 4, historyLimit: 5)
        for frame in 0..<1_003 { _ = subscribers.publish(frame) }
        #expect(subscribers.join().backlog == Array(998..<1_003))
    }
}
