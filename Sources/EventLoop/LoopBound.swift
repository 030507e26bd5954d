/// A value that is only ever used on one loop's thread, carried through `execute` to get
/// there (swift-nio's `NIOLoopBound`). The compiler cannot see the confinement, so the wrapper
/// carries its loop and checks it: reading `value` off that loop's thread traps in debug builds.
public struct LoopBound<Value>: @unchecked Sendable {
    /// The loop on whose thread `value` may be read.
    public let loop: EventLoop
    private let wrapped: Value

    /// Wraps `value` for use on `loop` (typically the loop a reply is sent to with `execute`).
    public init(_ value: Value, on loop: EventLoop) {
        wrapped = value
        self.loop = loop
    }

    /// The value; asserted to be read on `loop`'s thread (or before that loop runs).
    public var value: Value {
        loop.assertInLoop()
        return wrapped
    }
}
