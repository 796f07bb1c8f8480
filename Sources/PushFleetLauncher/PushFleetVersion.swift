/// The version every result records (`run.json`, `capacity.json`), whichever command or bench
/// played the fleet.
public enum PushFleetVersion {
    public static let current = "0.1.0"
}
