import JSON

extension ConfigDecoder {
    /// A secret: a string, `{"env": "NAME"}` or `{"file": "path"}`; env and file are checked now but kept as sources.
    /// A `token` is sent in a header, so it must also be visible ASCII (`SecretSource.resolveToken`).
    func secret(_ value: JSONValue, at path: String, token: Bool = false) -> SecretSource? {
        let source: SecretSource
        switch value {
        case .string:
            guard let s = string(value, at: path) else { return nil }
            source = .literal(s)
        case .object:
            guard let object = ObjectReader(value, at: path, keys: ["env", "file"], decoder: self) else { return nil }
            let env = object.string("env")
            let file = object.read("file") { filePath($0, at: $1) }
            switch (env, file) {
            case (let name?, nil): source = .env(name)
            case (nil, let file?): source = .file(file)
            case (.some, .some): return failure(path, "give either \"env\" or \"file\", not both")
            case (nil, nil):
                // An invalid member was reported already; only an empty object needs its own message.
                if object.has("env") || object.has("file") { return nil }
                return failure(path, "expected {\"env\": \"NAME\"} or {\"file\": \"path\"}")
            }
        default:
            return mismatch(value, at: path, expected: "a string, {\"env\": \"NAME\"} or {\"file\": \"path\"}")
        }
        guard resolvesSecrets else { return source }
        do {
            _ =
                try token
                ? source.resolveToken(at: path, environment: environment)
                : source.resolve(at: path, environment: environment)
        } catch {
            report(error.path, error.message)
            return nil
        }
        return source
    }
}
