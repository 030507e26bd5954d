import Credentials
import Glibc
import Synchronization
import Testing

@testable import Experiments

private func temporaryDirectory() -> String {
    var template = Array("/tmp/experiments-test-XXXXXX".utf8CString)
    return template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
}

private func removeDirectory(_ path: String) {
    guard let dir = opendir(path) else { return }
    while let entry = readdir(dir) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) {
            String(cString: $0.bindMemory(to: CChar.self).baseAddress!)
        }
        if name != ".", name != ".." { unlink(path + "/" + name) }
    }
    closedir(dir)
    rmdir(path)
}

private func mode(of path: String) -> mode_t? {
    var info = stat()
    return stat(path, &info) == 0 ? info.st_mode & 0o777 : nil
}

struct ExperimentServiceTests {
    @Test("the installation id is made once, 0600, and read back by the next start; nothing is written before prepare")
    func installationID() throws {
        let dir = temporaryDirectory()
        defer { removeDirectory(dir) }
        let first = ExperimentService(stateDirectory: dir)
        #expect(mode(of: dir + "/" + InstallationID.fileName) == nil)
        #expect(first.prepare() == nil)
        let id = first.installationID
        #expect(InstallationID.isValid(id))
        #expect(mode(of: dir + "/" + InstallationID.fileName) == 0o600)
        let second = ExperimentService(stateDirectory: dir)
        #expect(second.prepare() == nil)
        #expect(second.installationID == id)
    }

    @Test("overrides and today's exposures survive a restart; the state file is 0600")
    func statePersists() throws {
        let dir = temporaryDirectory()
        defer { removeDirectory(dir) }
        let service = ExperimentService(stateDirectory: dir)
        let before = service.overridesGeneration
        service.setOverride("new", for: "onboarding")
        #expect(service.overridesGeneration != before)
        let exposure = Assignment(experiment: "onboarding", variant: "control", reason: .assigned)
        #expect(service.claimExposures([exposure], subject: "jdoe", day: 20_000) == [exposure])
        service.exposuresCommitted([exposure])
        service.shutdown()
        #expect(mode(of: dir + "/" + ExperimentService.fileName) == 0o600)

        let restarted = ExperimentService(stateDirectory: dir)
        #expect(restarted.overrides().overrides.variant(for: "onboarding") == "new")
        #expect(restarted.claimExposures([exposure], subject: "jdoe", day: 20_000).isEmpty)
        #expect(restarted.claimExposures([exposure], subject: "jdoe", day: 20_001) == [exposure])
        restarted.clearOverride("onboarding")
        restarted.shutdown()
        #expect(ExperimentService(stateDirectory: dir).overrides().overrides.variant(for: "onboarding") == nil)
    }

    @Test("a state file that is not JSON is moved aside and the service starts empty")
    func corruptState() throws {
        let dir = temporaryDirectory()
        defer { removeDirectory(dir) }
        try DurableFile(directory: dir, name: ExperimentService.fileName).write(Array("not json".utf8))
        let service = ExperimentService(stateDirectory: dir)
        #expect(service.overrides().overrides == ExperimentOverrides())
        #expect(mode(of: dir + "/" + ExperimentService.fileName) == nil)
    }

    @Test("an override's saved callback runs once the state file holds it, while the service still runs")
    func savedAfterWrite() throws {
        let dir = temporaryDirectory()
        defer { removeDirectory(dir) }
        let service = ExperimentService(stateDirectory: dir)
        let outcome = Mutex<(error: TokenStoreError?, onDisk: Bool)?>(nil)
        service.setOverride("grid", for: "layout") { error in
            let file = DurableFile(directory: dir, name: ExperimentService.fileName).read()
            guard case .bytes(let bytes) = file else { return }
            outcome.withLock { $0 = (error, String(decoding: bytes, as: UTF8.self).contains("\"layout\":\"grid\"")) }
        }
        service.shutdown()  // runs the queued write and its callback
        #expect(outcome.withLock { $0?.error } == nil)
        #expect(outcome.withLock { $0?.onDisk } == true)
    }

    @Test("a FIFO under the state file's name is set aside without being opened for a writer")
    func fifoIsSetAside() throws {
        let dir = temporaryDirectory()
        defer { removeDirectory(dir) }
        #expect(mkfifo(dir + "/" + ExperimentService.fileName, 0o600) == 0)
        let service = ExperimentService(stateDirectory: dir)
        #expect(service.overrides().overrides == ExperimentOverrides())
        #expect(mode(of: dir + "/" + ExperimentService.fileName) == nil)
    }
}
