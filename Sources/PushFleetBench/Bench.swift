public import ArgumentParser

/// `pushfleet bench …`: the benchmarks, one command each.
public struct Bench: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        abstract: "Benchmarks; each prints its figures in one table.",
        subcommands: [DeliveryBench.self, FleetBench.self, OmissionBench.self, HTTPBench.self, TLSBench.self, CapacityBench.self, ShardsBench.self, SoakBench.self, TokenBench.self]
    )

    public init() {}
}
