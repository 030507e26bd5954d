import Credentials
import EventLoop

/// The subject of logged-out assignments: a random id made once per state directory and kept
/// in `<stateDirectory>/installation-id` (mode 0600), so a machine keeps its variants across
/// restarts until someone logs in.
public enum InstallationID {
    /// The file's name in the state directory.
    public static let fileName = "installation-id"

    /// The stored id, or a new one (128 random bits, base64url) written durably. Blocks on disk
    /// I/O: call at startup. A file that does not hold an id is moved aside and replaced.
    public static func loadOrCreate(stateDirectory: String) throws(TokenStoreError) -> String {
        let file = DurableFile(directory: stateDirectory, name: fileName, sizeLimit: 4096)
        switch file.read() {
        case .bytes(let bytes):
            let text = String(decoding: bytes, as: UTF8.self).trimmingSpace()
            if isValid(text) { return text }
            setAside(file, reason: "it does not hold an installation id")
        case .unreadable(let reason):
            setAside(file, reason: reason)
        case .missing:
            break
        }
        let id = randomToken(bytes: 16)
        try file.write(Array((id + "\n").utf8))
        return id
    }

    /// Moves an unusable id file aside and says so: logged-out subjects get new variants.
    private static func setAside(_ file: DurableFile, reason: String) {
        let moved = file.moveAside()
        Log.emit(
            .warning, "installation_id_unreadable",
            [
                "movedTo": .string(moved), "reason": .string(reason),
                "message": .string("a new installation id is made"),
            ])
    }

    /// 8 to 128 characters of base64url: what we write, and nothing a header could choke on.
    static func isValid(_ text: String) -> Bool {
        (8...128).contains(text.utf8.count)
            && text.utf8.allSatisfy { b in
                (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || b == 0x5F
                    || b == 0x2D
            }
    }
}

extension String {
    /// Without leading and trailing spaces, tabs and newlines.
    func trimmingSpace() -> String {
        let isSpace: (UInt8) -> Bool = { $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D }
        let bytes = Array(utf8)
        guard let first = bytes.firstIndex(where: { !isSpace($0) }), let last = bytes.lastIndex(where: { !isSpace($0) })
        else { return "" }
        return String(decoding: bytes[first...last], as: UTF8.self)
    }
}
