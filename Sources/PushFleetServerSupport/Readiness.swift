import Synchronization

/// A value that becomes known once (a server's bound port), awaited by any number of tasks.
public final class Readiness<Value: Sendable>: Sendable {
    private enum State {
        case waiting([CheckedContinuation<Value, any Error>])
        case ready(Value)
        case failed(any Error)
    }

    private let state = Mutex(State.waiting([]))

    public init() {}

    public func succeed(_ value: Value) {
        resolve(.success(value))
    }

    public func fail(_ error: any Error) {
        resolve(.failure(error))
    }

    private func resolve(_ result: Result<Value, any Error>) {
        let waiters: [CheckedContinuation<Value, any Error>] = state.withLock { state in
            guard case .waiting(let waiters) = state else { return [] }
            switch result {
            case .success(let value): state = .ready(value)
            case .failure(let error): state = .failed(error)
            }
            return waiters
        }
        for waiter in waiters { waiter.resume(with: result) }
    }

    public func value() async throws -> Value {
        try await withCheckedThrowingContinuation { continuation in
            let result: Result<Value, any Error>? = state.withLock { state in
                switch state {
                case .waiting(var waiters):
                    waiters.append(continuation)
                    state = .waiting(waiters)
                    return nil
                case .ready(let value): return .success(value)
                case .failed(let error): return .failure(error)
                }
            }
            if let result { continuation.resume(with: result) }
        }
    }
}
