//! The request on its own: images split, fields dropped, tokens estimated.

use super::*;

#[test]
fn a_data_url_splits_into_media_type_and_data() {
    let image = Image { url: "data:image/png;base64,iVBORw0KGgo=".into(), detail: None, cache: None };
    assert_eq!(image.inline(), Some(InlineImage { media_type: "image/png", data: "iVBORw0KGgo=" }));
    let remote = Image { url: "https://example.com/cat.png".into(), detail: None, cache: None };
    assert_eq!(remote.inline(), None);
    let not_base64 = Image { url: "data:text/plain,hello".into(), detail: None, cache: None };
    assert_eq!(not_base64.inline(), None);
}

#[test]
fn dropping_fields_takes_out_exactly_those() {
    let mut user = Message::text(Role::User, "look");
    user.content.push(Part::Other(serde_json::json!({ "type": "input_audio" })));
    user.content.push(Part::Image(Image { url: "https://x/y.png".into(), detail: None, cache: None }));
    user.name = Some("ann".into());
    let mut req = ChatRequest { messages: vec![user], parallel_tool_calls: Some(false), ..ChatRequest::default() };
    req.extra.insert("seed".into(), serde_json::json!(7));
    req.extra.insert("user".into(), serde_json::json!("u1"));
    let fields = [
        Field::top("seed"),
        Field::top("parallel_tool_calls"),
        Field::message(0, "name"),
        Field::Part(0, 1, "audio"),
        Field::Part(0, 2, "an image by URL"),
    ];
    let dropped = req.without(&fields);
    assert_eq!(dropped.messages[0].content, vec![Part::Text { text: "look".into(), cache: None }]);
    assert_eq!(dropped.messages[0].name, None);
    assert_eq!(dropped.parallel_tool_calls, None);
    assert_eq!(dropped.extra.keys().collect::<Vec<_>>(), ["user"]);
    assert_eq!(fields[4].to_string(), "messages[0].content[2] (an image by URL)");
}

#[test]
fn a_field_named_with_its_conflict_drops_only_itself() {
    let req = ChatRequest {
        temperature: Some(0.2),
        top_p: Some(0.5),
        reasoning_effort: Some("high".into()),
        ..ChatRequest::default()
    };
    let field = Field::Together("reasoning_effort".into(), "temperature".into());
    assert_eq!(field.to_string(), "reasoning_effort (together with temperature)");
    let dropped = req.without(&[field]);
    assert_eq!((dropped.reasoning_effort, dropped.temperature), (None, Some(0.2)));
    let dropped = req.without(&[Field::top("temperature"), Field::top("top_p")]);
    assert_eq!((dropped.temperature, dropped.top_p), (None, None));
}

#[test]
fn the_estimate_counts_text_tool_calls_and_the_output_reserve() {
    let mut call = Message::text(Role::Assistant, "");
    call.tool_calls.push(ToolCall { id: "c1".into(), name: "abcd".into(), arguments: "{}".into() });
    let req = ChatRequest { messages: vec![Message::text(Role::User, "12345678"), call], ..ChatRequest::default() };
    assert_eq!(req.estimated_tokens(), 2 + 2 + DEFAULT_OUTPUT_RESERVE);
}

#[test]
fn only_what_asks_nothing_of_the_answer_is_safe_to_drop() {
    let tool = |kind: &str| Field::Tool { kind: kind.into(), name: Some("x".into()) };
    let cases = [
        (ClientDialect::Messages, Field::Untranslated("context_management".into()), true),
        (ClientDialect::Messages, Field::Untranslated("thinking".into()), true),
        (ClientDialect::Messages, Field::Top("thinking".into()), false),
        (ClientDialect::Messages, Field::Top("metadata.user_id".into()), true),
        (ClientDialect::Gemini, Field::Top("generationConfig.topK".into()), true),
        (ClientDialect::Gemini, Field::Top("generationConfig.temperature".into()), false),
        (ClientDialect::ChatCompletions, Field::Untranslated("seed".into()), false),
        (ClientDialect::ChatCompletions, Field::Untranslated("context_management".into()), false),
        (ClientDialect::Responses, tool("namespace"), true),
        (ClientDialect::Responses, tool("web_search"), false),
        (ClientDialect::Messages, tool("namespace"), false),
        (ClientDialect::Messages, Field::Together("thinking".into(), "temperature".into()), false),
    ];
    for (dialect, field, safe) in cases {
        assert_eq!(dialect.safe_to_drop(&field), safe, "{dialect:?} {field}");
    }
}
