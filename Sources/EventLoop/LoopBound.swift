import Glibc

/// A value that is only ever used on one loop's thread, carried through `execute` to get there.
/// The compiler cannot see the confinement, so it is asserted by construction: the value is
/// created on that loop and unwrapped only inside a task running on it.
public struct LoopBound<Value>: @unchecked Sendable {
    /// The value.
    public let value: Value
    /// Wraps `value`, created on the loop that will use it.
    public init(_ value: Value) { self.value = value }
}
