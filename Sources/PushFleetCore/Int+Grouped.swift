extension BinaryInteger {
    /// 9968 as `9,968`, whatever the locale: counts in messages read the same on every machine.
    public var grouped: String {
        let digits = String(magnitude)
        var text = ""
        text.reserveCapacity(digits.count + digits.count / 3 + 1)
        for (index, digit) in digits.enumerated() {
            if index > 0, (digits.count - index) % 3 == 0 { text.append(",") }
            text.append(digit)
        }
        return (self < 0 ? "-" : "") + text
    }
}
