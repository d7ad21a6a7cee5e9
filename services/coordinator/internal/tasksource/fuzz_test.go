package tasksource

import (
	"strings"
	"testing"
)

// FuzzParseFile: whatever a task file holds, parsing it never panics, every
// task it yields passes CheckTask, and an error never quotes the input the
// way encoding/json's messages do ("invalid character 'r'").
func FuzzParseFile(f *testing.F) {
	for _, s := range []string{
		"{\"id\":\"q1\",\"question\":\"1+1?\",\"answer\":2,\"env_mode\":\"math\"}\n# c\n{\"task_id\":7}\n",
		" [{\"id\":\"a\",\"env_config\":{\"snapshot\":\"s\",\"proxy\":true,\"k\":[1]}},{\"id\":\"b\"}]",
		"{\n  \"id\": \"os-1\",\n  \"instruction\": \"do it\",\n  \"config\": []\n}\n",
		"root:$6$x:19000:0:99999:7:::\n",
		"{\"id\":\"../x\",\"domain\":\"..\"}",
		"\ufeff[{\"id\":{\"a\":1}}]",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tasks, err := parseFile(data)
		if err != nil {
			if strings.Contains(err.Error(), "'") {
				t.Fatalf("error quotes the input: %v", err)
			}
			return
		}
		for i, task := range tasks {
			if field, msg := CheckTask(task); msg != "" {
				t.Fatalf("task %d passed parsing but not CheckTask: %s: %s", i, field, msg)
			}
		}
	})
}
