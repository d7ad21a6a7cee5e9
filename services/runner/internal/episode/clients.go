package episode

import (
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc"

	rmv1 "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/metrics"
)

// chatClient is the gateway client's Chat; rolloutmeshv1.ModelGatewayClient
// implements it.
type chatClient interface {
	Chat(ctx context.Context, in *rmv1.ChatRequest, opts ...grpc.CallOption) (*rmv1.ChatResponse, error)
}

// appendClient is the storage client's AppendSteps;
// rolloutmeshv1.StorageClient implements it.
type appendClient interface {
	AppendSteps(ctx context.Context, opts ...grpc.CallOption) (grpc.ClientStreamingClient[rmv1.AppendStepsRequest, rmv1.AppendStepsResponse], error)
}

// judgeFactory picks the llm_judgement judge for an agent config; when
// Deps.Judge is nil the judge is the gateway itself.
type judgeFactory func(a *rmv1.AgentConfig) metrics.Judge

func (d Deps) judge(a *rmv1.AgentConfig) metrics.Judge {
	if d.Judge != nil {
		return d.Judge(a)
	}
	if d.Chat == nil {
		return nil
	}
	model := a.GetJudgeModel()
	if model == "" {
		model = a.GetModel()
	}
	return &chatJudge{chat: d.Chat, model: model}
}

// chatJudge is the llm_judgement metric's judge: a model behind the gateway
// asked whether the prediction matches the reference.
type chatJudge struct {
	chat  chatClient
	model string
}

const judgePrompt = `You are grading an answer to a question against the reference answer.
Question: %s
Reference answer: %s
Predicted answer: %s
Is the predicted answer correct (it means the same as the reference)? Reply with exactly one word: yes or no.`

func (j *chatJudge) Judge(ctx context.Context, question, reference, prediction string) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	zero := 0.0
	resp, err := j.chat.Chat(ctx, &rmv1.ChatRequest{
		Model:    j.model,
		Messages: []*rmv1.ChatMessage{{Role: "user", Content: []*rmv1.ContentPart{{Part: &rmv1.ContentPart_Text{Text: fmt.Sprintf(judgePrompt, question, reference, prediction)}}}}},
		Sampling: &rmv1.SamplingParams{Temperature: &zero},
	})
	if err != nil {
		return 0, fmt.Errorf("llm_judgement: %w", err)
	}
	if len(resp.GetChoices()) == 0 {
		return 0, fmt.Errorf("llm_judgement: no answer")
	}
	var text strings.Builder
	for _, p := range resp.GetChoices()[0].GetMessage().GetContent() {
		text.WriteString(p.GetText())
	}
	ans := strings.ToLower(strings.TrimSpace(text.String()))
	switch {
	case strings.HasPrefix(ans, "yes"):
		return 1, nil
	case strings.HasPrefix(ans, "no"):
		return 0, nil
	}
	return 0, fmt.Errorf("llm_judgement: judge answered %q, not yes or no", clip(ans))
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80]
	}
	return s
}
