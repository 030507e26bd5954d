/// A reference that does not retain its object, for the few places on the forwarding path where
/// the object provably outlives the holder and a retain/release pair per request shows up in the
/// instruction count (`bench/cost-profile.sh`). It is `unowned(unsafe)` in one place, with the
/// reasoning written once, instead of scattered through business logic.
///
/// The holder's documentation must say who keeps the object alive. Debug builds (and so every test)
/// hold the reference `unowned` instead, so a use after the object is freed traps there rather than
/// reading freed memory; release builds skip the reference counting entirely.
///
/// Like swift-nio's `NIOLoopBound`, this carries a promise the compiler cannot check; unlike it,
/// the promise is about lifetime, not threads (pair it with `LoopBound` where both hold).
public struct Unretained<Object: AnyObject> {
    #if DEBUG
    @usableFromInline unowned let reference: Object
    #else
    @usableFromInline unowned(unsafe) let reference: Object
    #endif

    /// Refers to `object`, which the caller guarantees outlives this value and every copy of it.
    @inlinable
    public init(_ object: Object) {
        reference = object
    }

    /// The object.
    @inlinable
    public var object: Object { reference }
}
