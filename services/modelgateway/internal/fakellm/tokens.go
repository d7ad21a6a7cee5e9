package fakellm

import (
	"hash/fnv"
	"strings"

	openai "github.com/sashabaranov/go-openai"
)

// Special token ids of the fake chat template. Word pieces hash to ids at or
// above firstWordID so they never collide with these.
const (
	tokSystem    = 1
	tokUser      = 2
	tokAssistant = 3
	tokTool      = 4
	tokOther     = 5
	tokImage     = 9
	firstWordID  = 1000
	vocabWords   = 100000
	// imageTokens is how many placeholder tokens one image costs, a
	// stand-in for a vision encoder's patch tokens.
	imageTokens = 16
)

// Pieces splits text into word pieces the way the fake tokenizer does: every
// word keeps the whitespace before it, as BPE vocabularies do, and the last
// keeps the whitespace after it, so the pieces joined are the text again
// (a scripted reply's code block keeps its lines). Whitespace alone is no
// piece.
func Pieces(text string) []string {
	var out []string
	start := 0
	for i := 0; i < len(text); {
		// Skip the whitespace before the next word, then the word.
		for i < len(text) && isSpace(text[i]) {
			i++
		}
		if i == len(text) {
			break
		}
		for i < len(text) && !isSpace(text[i]) {
			i++
		}
		out = append(out, text[start:i])
		start = i
	}
	if len(out) > 0 && start < len(text) {
		out[len(out)-1] += text[start:]
	}
	return out
}

// isSpace is ASCII whitespace, as strings.Fields splits ASCII text; other
// bytes, including those of multi-byte runes, belong to words.
func isSpace(b byte) bool {
	switch b {
	case ' ', '\t', '\n', '\r', '\v', '\f':
		return true
	}
	return false
}

// PieceID is the deterministic token id of a word piece: a hash, so tests can
// compute the ids they expect without a vocabulary.
func PieceID(piece string) int {
	h := fnv.New32a()
	h.Write([]byte(piece))
	return firstWordID + int(h.Sum32()%vocabWords)
}

// TokenIDs tokenizes text.
func TokenIDs(text string) []int {
	ps := Pieces(text)
	ids := make([]int, len(ps))
	for i, p := range ps {
		ids[i] = PieceID(p)
	}
	return ids
}

// PromptTokenIDs renders messages through the fake chat template: a role token,
// then the content's tokens (imageTokens placeholders per image), then the
// tool calls' names and arguments, and finally the assistant generation
// prompt.
func PromptTokenIDs(msgs []openai.ChatCompletionMessage) []int {
	var ids []int
	for _, m := range msgs {
		ids = append(ids, roleToken(m.Role))
		ids = append(ids, TokenIDs(m.Content)...)
		for _, p := range m.MultiContent {
			switch p.Type {
			case openai.ChatMessagePartTypeImageURL:
				for range imageTokens {
					ids = append(ids, tokImage)
				}
			default:
				ids = append(ids, TokenIDs(p.Text)...)
			}
		}
		for _, tc := range m.ToolCalls {
			ids = append(ids, TokenIDs(tc.Function.Name+" "+tc.Function.Arguments)...)
		}
	}
	return append(ids, tokAssistant)
}

func roleToken(role string) int {
	switch role {
	case openai.ChatMessageRoleSystem, openai.ChatMessageRoleDeveloper:
		return tokSystem
	case openai.ChatMessageRoleUser:
		return tokUser
	case openai.ChatMessageRoleAssistant:
		return tokAssistant
	case openai.ChatMessageRoleTool:
		return tokTool
	}
	return tokOther
}

// LogProb is the deterministic log probability fakellm gives token id: always
// negative, different for different ids.
func LogProb(id int) float64 { return -float64(id%997)/1000 - 0.001 }

// messageText joins a message's text parts.
func messageText(m openai.ChatCompletionMessage) string {
	if len(m.MultiContent) == 0 {
		return m.Content
	}
	var b strings.Builder
	for _, p := range m.MultiContent {
		if p.Type == openai.ChatMessagePartTypeText || p.Type == "" {
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(p.Text)
		}
	}
	return b.String()
}
