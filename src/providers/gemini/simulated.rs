//! How Gemini's `streamGenerateContent?alt=sse` writes its stream, as its
//! API reference shows it: each event a whole `GenerateContentResponse`.

use std::net::SocketAddr;

use serde_json::{Value, json};

use crate::providers::simulate::{
    Asked, Counts, Ending, Json, Offered, PROMPT_TOKENS, Simulated, WireEvent, array_at, count_parts, data, pick,
    str_at, text_of,
};

/// A simulated Gemini.
pub struct SimulatedGemini;

impl Simulated for SimulatedGemini {
    fn base_url(&self, addr: SocketAddr) -> String {
        format!("http://{addr}")
    }

    fn is_chat_path(&self, path: &str) -> bool {
        path.starts_with("/v1beta/models/") && path.contains(":streamGenerateContent") && path.contains("alt=sse")
    }

    fn auth_header(&self, key: &str) -> (&'static str, String) {
        ("x-goog-api-key", key.to_owned())
    }

    fn model(&self, path: &str, _body: &Value) -> String {
        path.trim_start_matches("/v1beta/models/").split(':').next().unwrap_or_default().to_owned()
    }

    fn turns(&self) -> (&'static str, &'static str) {
        ("contents", "model")
    }

    fn asked(&self, body: &Value) -> Asked {
        asked(body)
    }

    fn opening(&self, model: &str, _thinking: bool, _cached: usize) -> Vec<WireEvent> {
        vec![data(&json!({"candidates": [{"content": {"parts": [{"text": ""}], "role": "model"}, "index": 0}],
            "modelVersion": model}))]
    }

    fn reasoning(&self, model: &str, text: &str) -> WireEvent {
        data(&json!({"candidates": [{"content": {"parts": [
            {"text": text, "thought": true}], "role": "model"}, "index": 0}], "modelVersion": model}))
    }

    fn text_in(&self, model: &str, _block: usize, text: &str) -> WireEvent {
        data(&json!({"candidates": [{"content": {"parts": [{"text": text}], "role": "model"}, "index": 0}],
            "modelVersion": model}))
    }

    fn tool_call(&self, model: &str) -> Vec<WireEvent> {
        vec![data(&json!({"candidates": [{"content": {"parts": [
            {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}}], "role": "model"}, "index": 0}],
            "modelVersion": model}))]
    }

    fn ending(&self, model: &str, end: &Ending<'_>) -> Vec<WireEvent> {
        let Counts { output, reasoning, cached } = end.counts;
        let mut events = Vec::new();
        if let Some(call) = end.call {
            let args: Value = serde_json::from_str(&call.arguments.concat()).unwrap_or_default();
            events.push(data(&json!({"candidates": [{"content": {"parts": [
                {"functionCall": {"name": call.name, "args": args}}], "role": "model"}, "index": 0}],
                "modelVersion": model})));
        }
        let mut usage = json!({"promptTokenCount": PROMPT_TOKENS, "candidatesTokenCount": output,
            "totalTokenCount": PROMPT_TOKENS + output + reasoning});
        if reasoning > 0 {
            usage["thoughtsTokenCount"] = json!(reasoning);
        }
        if cached > 0 {
            usage["cachedContentTokenCount"] = json!(cached);
        }
        events.push(data(&json!({
            "candidates": [{"content": {"parts": [{"text": ""}], "role": "model"}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": usage, "modelVersion": model})));
        events
    }

    fn refusal(&self, model: &str) -> Vec<WireEvent> {
        vec![data(&json!({
            "candidates": [{"content": {"parts": [{"text": ""}], "role": "model"}, "finishReason": "SAFETY", "index": 0,
                "safetyRatings": [{"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH", "blocked": true}]}],
            "usageMetadata": {"promptTokenCount": PROMPT_TOKENS, "totalTokenCount": PROMPT_TOKENS},
            "modelVersion": model}))]
    }

    fn error_event(&self) -> WireEvent {
        data(&json!({"error": {"code": 503, "message": "The model is overloaded. Please try again later.",
            "status": "UNAVAILABLE"}}))
    }

    fn malformed(&self) -> WireEvent {
        b"data: {\"choices\": [{\"delta\": {\"content\": tru\n\n".to_vec()
    }

    fn error_body(&self, status: u16, message: &str) -> String {
        json!({"error": {"code": status, "message": message, "status": "UNAVAILABLE"}}).to_string()
    }

    fn context_length_message(&self) -> &'static str {
        "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576)."
    }

    fn huge_line(&self, padding: &str) -> WireEvent {
        data(&json!({"candidates": [{"content": {"parts": [{"text": ""}], "role": "model"}, "index": 0}],
            "padding": padding}))
    }

    fn wrong_types(&self) -> WireEvent {
        data(&json!({"candidates": [{"content": {"parts": [{"text": 17}], "role": 3}, "index": "zero"}]}))
    }

    fn overflowing_finish(&self, model: &str) -> Vec<WireEvent> {
        let max = u64::MAX;
        vec![data(&json!({
            "candidates": [{"content": {"parts": [{"text": ""}], "role": "model"}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": max, "candidatesTokenCount": max, "totalTokenCount": max},
            "modelVersion": model}))]
    }
}

/// What a Gemini body asks for beyond words.
pub(crate) fn asked(body: &Value) -> Asked {
    Asked { tool: tool(body), tool_results: results(body), json: json_asked(body), images: images(body) }
}

fn tool(body: &Value) -> Option<Offered> {
    let mode = str_at(body, "/toolConfig/functionCallingConfig/mode");
    if mode == Some("NONE") {
        return None;
    }
    let named = str_at(body, "/toolConfig/functionCallingConfig/allowedFunctionNames/0");
    let declarations = array_at(body, "/tools").iter().flat_map(|tool| array_at(tool, "/functionDeclarations"));
    // Google's API takes a field's proto name too, as `google-genai` sends this one.
    pick(declarations, named, "/name", &["/parametersJsonSchema", "/parameters_json_schema", "/parameters"])
}

fn results(body: &Value) -> Vec<String> {
    let Some(last) = array_at(body, "/contents").last().filter(|c| str_at(c, "/role") == Some("user")) else {
        return Vec::new();
    };
    let responses = array_at(last, "/parts").iter().filter_map(|part| part.pointer("/functionResponse/response"));
    responses
        .map(|response| match response.as_object() {
            // A result that was not a JSON object comes wrapped in `output`, as Gemini documents.
            Some(fields) if fields.len() == 1 && fields.contains_key("output") => text_of(&response["output"]),
            _ => response.to_string(),
        })
        .collect()
}

fn json_asked(body: &Value) -> Option<Json> {
    if str_at(body, "/generationConfig/responseMimeType") != Some("application/json") {
        return None;
    }
    let schema = ["/generationConfig/responseJsonSchema", "/generationConfig/responseSchema"]
        .iter()
        .find_map(|at| body.pointer(at));
    Some(schema.map_or(Json::Object, |schema| Json::Schema(schema.clone())))
}

fn images(body: &Value) -> usize {
    count_parts(array_at(body, "/contents"), "/parts", |part| {
        part.get("inlineData").is_some() || part.get("fileData").is_some()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_results_json_and_images() {
        let weather = json!({"type": "object", "properties": {"city": {"type": "string"}}});
        let asked = asked(&json!({"generationConfig": {"responseMimeType": "application/json",
            "responseJsonSchema": weather},
            "contents": [{"role": "user", "parts": [{"inlineData": {"mimeType": "image/png", "data": "AA"}},
                {"functionResponse": {"name": "get_weather", "response": {"output": "18C"}}}]}]}));
        assert_eq!(asked.tool_results, vec!["18C".to_owned()]);
        assert_eq!((asked.json, asked.images), (Some(Json::Schema(weather)), 1));
    }
}
