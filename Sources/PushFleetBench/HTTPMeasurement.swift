/// One tool's run in `bench http`: requests answered, the generator's CPU seconds, wall seconds.
struct HTTPMeasurement {
    let tool: String
    let requests: Double
    let cpu: Double
    let wall: Double

    var perCPU: Double { requests / max(cpu, 0.001) }
}
