use serde::{Deserialize, Serialize};

/// One document for the OCR service (SPEC §16).
#[derive(Debug, Clone, PartialEq)]
pub struct OcrRequest {
    /// The file's bytes (an image or a PDF).
    pub bytes: Vec<u8>,
    /// The file name sent in the multipart body.
    pub filename: String,
    /// The media type, decided from the magic bytes (`image/png`, `application/pdf`, …).
    pub content_type: &'static str,
}

/// What `POST /parse` is asked to return.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OcrReturnType {
    /// Markdown.
    Markdown,
    /// JSON layout blocks.
    Json,
}

/// The result of `POST /ocr/text`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OcrText {
    /// The task the service ran (e.g. `text`).
    pub task_type: String,
    /// The recognised text.
    pub content: String,
    /// The service's message.
    pub message: String,
}

/// The result of `POST /parse`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OcrLayout {
    /// The parsed document (markdown text or JSON).
    pub content: serde_json::Value,
    /// The media type of `content` as the service reported it.
    pub content_type: Option<String>,
    /// Extra files the service produced.
    pub files: Vec<String>,
    /// Where the full result can be downloaded, if the service offers that.
    pub download_url: Option<String>,
    /// The service's message.
    pub message: String,
}
