import PropertyBased
import PushFleetCore
import PushFleetHub
import PushFleetTestSupport
import Testing

@Suite("Notification hub tag expressions")
struct HubTagExpressionTests {
    @Test func parsesTheDocumentedForms() throws {
        let expression = try TagExpression.parse("(follows_RedSox || follows_Cardinals) && location_Boston")
        #expect(expression.matches(["follows_RedSox", "location_Boston"]))
        #expect(!expression.matches(["follows_RedSox"]))
        #expect(!expression.matches(["location_Boston"]))
        #expect(try TagExpression.parse("A").matches(["A"]))
        #expect(try TagExpression.parse("!A").matches([]))
        #expect(try TagExpression.parse("a || b && c").matches(["a"]), "&& binds tighter than ||")
        #expect(!(try TagExpression.parse("(a || b) && c").matches(["a"])))
        #expect(try TagExpression.parse("$InstallationId:{abc-1}").matches(["$InstallationId:{abc-1}"]))
        #expect(try TagExpression.parse("username:bob||from:alice").tags == ["username:bob", "from:alice"])
    }

    @Test func enforcesTheDocumentedLimits() throws {
        let twenty = (1...20).map { "t\($0)" }.joined(separator: " || ")
        #expect(throws: Never.self) { try TagExpression.parse(twenty) }
        #expect(throws: TagExpression.ParseError.self) { try TagExpression.parse(twenty + " || t21") }
        let six = "a && b && c && d && e && f"
        #expect(throws: Never.self) { try TagExpression.parse(six) }
        #expect(throws: TagExpression.ParseError.self) { try TagExpression.parse(six + " && g") }
        #expect(throws: TagExpression.ParseError.self) { try TagExpression.parse("a || b || c || d || e || f || !g") }
        #expect(throws: TagExpression.ParseError.self) { try TagExpression.parse(String(repeating: "x", count: 121)) }
    }

    @Test(arguments: ["", "   ", "a &", "a | b", "(a", "a)", "a && ", "!", "a b", "a,b", "a && (b || )", "tag with space", "é", "$", "((((((((((((((((((((((((((((((((((a))))))))))))))))))))))))))))))))))"])
    func refusesMalformedExpressions(_ text: String) {
        #expect(throws: TagExpression.ParseError.self) { try TagExpression.parse(text) }
    }

    // MARK: Against a brute-force reference

    /// An expression tree written apart from the parser, with its own evaluation.
    indirect enum Tree {
        case tag(String), not(Tree), and(Tree, Tree), or(Tree, Tree)

        func eval(_ tags: Set<String>) -> Bool {
            switch self {
            case .tag(let tag): tags.contains(tag)
            case .not(let inner): !inner.eval(tags)
            case .and(let lhs, let rhs): lhs.eval(tags) && rhs.eval(tags)
            case .or(let lhs, let rhs): lhs.eval(tags) || rhs.eval(tags)
            }
        }

        var leaves: Int {
            switch self {
            case .tag: 1
            case .not(let inner): inner.leaves
            case .and(let lhs, let rhs), .or(let lhs, let rhs): lhs.leaves + rhs.leaves
            }
        }

        var onlyOr: Bool {
            switch self {
            case .tag: true
            case .not, .and: false
            case .or(let lhs, let rhs): lhs.onlyOr && rhs.onlyOr
            }
        }

        var precedence: Int {
            switch self {
            case .or: 1
            case .and: 2
            case .not: 3
            case .tag: 4
            }
        }

        /// Text with only the parentheses precedence needs, some extra, and random spacing.
        func text(_ rng: inout SplitMix64, parent: Int = 0) -> String {
            let space = rng.next() % 2 == 0 ? " " : ""
            var body: String
            switch self {
            case .tag(let tag): body = tag
            case .not(let inner): body = "!" + space + inner.text(&rng, parent: 3)
            case .and(let lhs, let rhs): body = lhs.text(&rng, parent: 2) + space + "&&" + space + rhs.text(&rng, parent: 3)
            case .or(let lhs, let rhs): body = lhs.text(&rng, parent: 1) + space + "||" + space + rhs.text(&rng, parent: 2)
            }
            if precedence < parent || rng.next() % 8 == 0 { body = "(" + body + ")" }
            return body
        }
    }

    static let alphabet = ["a", "b", "c", "user:1", "from_x", "k.y-z@#"]

    static func tree(_ rng: inout SplitMix64, depth: Int) -> Tree {
        let roll = rng.next() % 10
        if depth == 0 || roll < 3 { return .tag(alphabet[Int(rng.next() % UInt64(alphabet.count))]) }
        switch roll {
        case 3: return .not(tree(&rng, depth: depth - 1))
        case 4, 5, 6: return .and(tree(&rng, depth: depth - 1), tree(&rng, depth: depth - 1))
        default: return .or(tree(&rng, depth: depth - 1), tree(&rng, depth: depth - 1))
        }
    }

    @Test func evaluationMatchesABruteForceReference() async {
        await propertyCheck(count: 2000, input: Gen.uint64()) { seed in
            var rng = SplitMix64(seed: seed)
            let reference = Self.tree(&rng, depth: 1 + Int(rng.next() % 4))
            let text = reference.text(&rng)
            let withinLimits = reference.onlyOr ? reference.leaves <= 20 : reference.leaves <= 6
            let parsed: TagExpression
            do {
                parsed = try TagExpression.parse(text)
            } catch {
                #expect(!withinLimits, "'\(text)' was refused: \(error)")
                return
            }
            #expect(withinLimits, "'\(text)' names \(reference.leaves) tags and was accepted")
            // Every subset of the alphabet, plus a tag the expression does not name.
            for mask in 0..<(1 << Self.alphabet.count) {
                var tags: Set<String> = ["unrelated"]
                for (index, tag) in Self.alphabet.enumerated() where mask & (1 << index) != 0 { tags.insert(tag) }
                #expect(parsed.matches(tags) == reference.eval(tags), "'\(text)' on \(tags.sorted())")
            }
            #expect(parsed.matchesUntagged == reference.eval([]))
        }
    }
}
