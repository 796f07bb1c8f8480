import HTTPTypes
import NIOCore

extension HTTP1FastPath {
    /// The status line, the answer's fields and its `content-length`, and its body, in one buffer.
    static func encode(_ answer: CompleteResponse, allocator: ByteBufferAllocator) -> ByteBuffer {
        var buffer = allocator.buffer(capacity: 128 + answer.body.readableBytes)
        if answer.status == .ok {
            buffer.writeStaticString("HTTP/1.1 200 OK\r\n")
        } else {
            buffer.writeStaticString("HTTP/1.1 ")
            buffer.writeString(String(answer.status.code))
            buffer.writeInteger(UInt8(ascii: " "))
            buffer.writeString(answer.status.reasonPhrase)
            buffer.writeStaticString("\r\n")
        }
        for field in answer.headers where field.name != .contentLength {
            buffer.writeString(field.name.rawName)
            buffer.writeStaticString(": ")
            buffer.writeString(field.value)
            buffer.writeStaticString("\r\n")
        }
        buffer.writeStaticString("content-length: ")
        buffer.writeString(String(answer.body.readableBytes))
        buffer.writeStaticString("\r\n\r\n")
        var body = answer.body
        buffer.writeBuffer(&body)
        return buffer
    }
}
