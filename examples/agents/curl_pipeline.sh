#!/bin/sh
# A shell pipeline: jq builds the request, curl sends it, jq prints the answer.
set -eu
task=$(cat)
a=$(printf '%s' "$task" | jq -r .a)
b=$(printf '%s' "$task" | jq -r .b)
jq -n --arg model "$OPENAI_MODEL" --arg question "What is $a + $b?" \
    '{model: $model, messages: [{role: "user", content: $question}]}' |
    curl -sS --fail "$OPENAI_BASE_URL/chat/completions" \
        -H "Authorization: Bearer $OPENAI_API_KEY" \
        -H "Content-Type: application/json" \
        --data-binary @- |
    jq -r '.choices[0].message.content'
