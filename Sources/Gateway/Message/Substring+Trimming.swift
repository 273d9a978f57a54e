extension Substring {
    /// Without the optional whitespace (spaces and tabs) a field value may carry around a list element.
    var trimmingSpaces: Substring {
        var text = self
        while text.first == " " || text.first == "\t" { text = text.dropFirst() }
        while text.last == " " || text.last == "\t" { text = text.dropLast() }
        return text
    }
}
