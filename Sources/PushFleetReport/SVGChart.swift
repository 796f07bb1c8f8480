import Foundation
import PushFleetCore

/// Small SVG charts drawn as text: axes with labelled ticks and units, line series told apart by
/// dash pattern and marker as well as colour (so they survive grey-scale printing), vertical
/// event markers, and a legend. No script, no external resources.
struct SVGChart {
    struct Series {
        var name: String
        var points: [(x: Double, y: Double)]
        /// Picks the colour, and the dash pattern unless `dash` is given.
        var style: Int
        var dash: String? = nil

        var colour: String { SVGChart.colours[style % SVGChart.colours.count] }
        var pattern: String { dash ?? SVGChart.dashes[style % SVGChart.dashes.count] }
    }

    struct Tick {
        var value: Double
        var label: String
    }

    struct Marker {
        var x: Double
        var label: String
    }

    struct Band {
        var from: Double
        var to: Double
        var label: String
    }

    var id: String
    var title: String
    var xLabel: String
    var yLabel: String
    var series: [Series] = []
    var xTicks: [Tick]? = nil
    var markers: [Marker] = []
    /// Spans shaded behind the series: the windows of network faults.
    var bands: [Band] = []
    var width = 760.0
    var height = 320.0

    /// Colour-blind-safe colours (Okabe–Ito) paired with distinct dash patterns.
    static let colours = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442"]
    static let dashes = ["", "6 4", "2 3", "10 3 2 3", "1 6", "12 6", "4 2 4 8", "3 9"]

    private let left = 70.0, right = 36.0, top = 36.0

    /// Legend entries wrapped into rows that fit the width.
    private var legendRows: [[(Series, Double)]] {
        var rows: [[(Series, Double)]] = [[]]
        var x = left
        for item in series {
            let entryWidth = 40 + Double(item.name.count) * 6.5
            if x + entryWidth > width - right, !rows[rows.count - 1].isEmpty {
                rows.append([])
                x = left
            }
            rows[rows.count - 1].append((item, x))
            x += entryWidth
        }
        return rows
    }

    func render() -> String {
        let allPoints = series.flatMap(\.points)
        let xs = allPoints.map(\.x) + (xTicks?.map(\.value) ?? []) + markers.map(\.x)
        let xMin = xs.min() ?? 0
        let xMax = max((xs.max() ?? 1), xMin + 1e-9)
        // Counts and latencies: an empty or all-zero chart still gets a readable 0…1 axis.
        let yMax = Self.niceCeiling(max(allPoints.map(\.y).max() ?? 1, 1))
        let rows = legendRows
        let bottom = 40.0 + Double(rows.count) * 16
        let plotWidth = width - left - right
        let plotHeight = height - top - bottom
        func px(_ x: Double) -> Double { left + (x - xMin) / (xMax - xMin) * plotWidth }
        func py(_ y: Double) -> Double { top + plotHeight - y / yMax * plotHeight }

        var svg = "<svg id=\"\(id)\" class=\"chart\" role=\"img\" aria-labelledby=\"\(id)-title\" viewBox=\"0 0 \(Int(width)) \(Int(height))\" xmlns=\"http://www.w3.org/2000/svg\">"
        svg += "<title id=\"\(id)-title\">\(XMLText.escape(title))</title>"
        svg += "<text x=\"\(left)\" y=\"20\" class=\"chart-title\">\(XMLText.escape(title))</text>"
        // Axes and grid.
        for i in 0...4 {
            let value = yMax * Double(i) / 4
            let y = py(value)
            svg += "<line x1=\"\(left)\" y1=\"\(f(y))\" x2=\"\(f(width - right))\" y2=\"\(f(y))\" class=\"grid\"/>"
            svg += "<text x=\"\(f(left - 6))\" y=\"\(f(y + 4))\" text-anchor=\"end\" class=\"tick\">\(Self.number(value))</text>"
        }
        let ticks = xTicks ?? Self.linearTicks(xMin, xMax)
        for tick in ticks where tick.value >= xMin && tick.value <= xMax {
            let x = px(tick.value)
            svg += "<line x1=\"\(f(x))\" y1=\"\(f(top + plotHeight))\" x2=\"\(f(x))\" y2=\"\(f(top + plotHeight + 5))\" class=\"axis\"/>"
            svg += "<text x=\"\(f(x))\" y=\"\(f(top + plotHeight + 18))\" text-anchor=\"middle\" class=\"tick\">\(XMLText.escape(tick.label))</text>"
        }
        svg += "<line x1=\"\(left)\" y1=\"\(top)\" x2=\"\(left)\" y2=\"\(f(top + plotHeight))\" class=\"axis\"/>"
        svg += "<line x1=\"\(left)\" y1=\"\(f(top + plotHeight))\" x2=\"\(f(width - right))\" y2=\"\(f(top + plotHeight))\" class=\"axis\"/>"
        svg += "<text x=\"\(f(left + plotWidth / 2))\" y=\"\(f(top + plotHeight + 34))\" text-anchor=\"middle\" class=\"axis-label\">\(XMLText.escape(xLabel))</text>"
        svg += "<text transform=\"translate(16 \(f(top + plotHeight / 2))) rotate(-90)\" text-anchor=\"middle\" class=\"axis-label\">\(XMLText.escape(yLabel))</text>"
        // Fault windows, behind everything drawn after.
        for band in bands where band.to > xMin && band.from < xMax {
            let x0 = px(max(band.from, xMin))
            let x1 = px(min(band.to, xMax))
            svg += "<rect class=\"band\" x=\"\(f(x0))\" y=\"\(top)\" width=\"\(f(max(x1 - x0, 1)))\" height=\"\(f(plotHeight))\"><title>\(XMLText.escape(band.label))</title></rect>"
        }
        // Event markers.
        for (index, marker) in markers.enumerated() {
            let x = px(marker.x)
            svg += "<line x1=\"\(f(x))\" y1=\"\(top)\" x2=\"\(f(x))\" y2=\"\(f(top + plotHeight))\" class=\"marker\"><title>\(XMLText.escape(marker.label))</title></line>"
            svg += "<text x=\"\(f(x + 3))\" y=\"\(f(top + 10 + Double(index % 3) * 11))\" class=\"marker-label\">\(XMLText.escape(marker.label))</text>"
        }
        // Series.
        for item in series where !item.points.isEmpty {
            let colour = item.colour
            let dash = item.pattern
            let path = item.points.map { "\(f(px($0.x))),\(f(py($0.y)))" }.joined(separator: " ")
            svg += "<polyline class=\"series\" data-series=\"\(XMLText.escape(item.name))\" points=\"\(path)\" fill=\"none\" stroke=\"\(colour)\" stroke-width=\"2\""
            svg += dash.isEmpty ? "/>" : " stroke-dasharray=\"\(dash)\"/>"
        }
        // Legend, wrapped into rows.
        for (row, entries) in rows.enumerated() {
            let y = top + plotHeight + 52 + Double(row) * 16
            for (item, x) in entries {
                svg += "<line x1=\"\(f(x))\" y1=\"\(f(y - 4))\" x2=\"\(f(x + 24))\" y2=\"\(f(y - 4))\" stroke=\"\(item.colour)\" stroke-width=\"2\""
                svg += item.pattern.isEmpty ? "/>" : " stroke-dasharray=\"\(item.pattern)\"/>"
                svg += "<text x=\"\(f(x + 28))\" y=\"\(f(y))\" class=\"legend\">\(XMLText.escape(item.name))</text>"
            }
        }
        svg += "</svg>"
        return svg
    }

    private func f(_ value: Double) -> String { String(format: "%.1f", value) }

    static func niceCeiling(_ value: Double) -> Double {
        let magnitude = pow(10, floor(log10(value)))
        for step in [1.0, 2, 2.5, 5, 10] where step * magnitude >= value { return step * magnitude }
        return 10 * magnitude
    }

    static func linearTicks(_ low: Double, _ high: Double) -> [Tick] {
        let step = niceCeiling((high - low) / 6)
        var value = (low / step).rounded(.up) * step
        var ticks: [Tick] = []
        while value <= high + 1e-9 {
            ticks.append(Tick(value: value, label: number(value)))
            value += step
        }
        return ticks
    }

    static func number(_ value: Double) -> String {
        if value == 0 { return "0" }
        if abs(value) >= 100 || value == value.rounded() { return String(format: "%.0f", value) }
        if abs(value) >= 1 { return String(format: "%.1f", value) }
        return String(format: "%.2g", value)
    }

    /// The HdrHistogram percentile axis: x = log10(1 / (1 − p)), so 90%, 99%, 99.9% … are evenly spaced.
    static func percentileX(_ percentile: Double) -> Double {
        log10(1 / max(1 - min(percentile, 99.999) / 100, 1e-5))
    }

    static let percentileTicks: [Tick] = [
        Tick(value: 0, label: "0%"), Tick(value: 1, label: "90%"), Tick(value: 2, label: "99%"), Tick(value: 3, label: "99.9%"),
        Tick(value: 4, label: "99.99%"), Tick(value: 5, label: "99.999%"),
    ]
}
