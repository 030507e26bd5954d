import Credentials
import Glibc
import Testing
@testable import Experiments

private func temporaryDirectory() -> String {
    var template = Array("/tmp/experiments-test-XXXXXX".utf8CString)
    return template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
}

private func removeDirectory(_ path: String) {
    guard let dir = opendir(path) else { return }
    while let entry = readdir(dir) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
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
}
