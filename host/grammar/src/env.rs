//! [`TokenEnv`]: a model's vocabulary as llguidance sees it, built once per tokenizer.

use std::sync::Arc;

use llguidance::{api::TopLevelGrammar, Matcher, ParserFactory};
use toktrie::{TokRxInfo, TokTrie, TokenizerEnv};

use crate::GrammarError;

/// Tokenizes bytes the way the model's own tokenizer does (for llguidance's forced tokens).
pub type Tokenize = dyn Fn(&[u8]) -> Vec<u32> + Send + Sync;

struct Env {
    trie: TokTrie,
    tokenize: Arc<Tokenize>,
}

impl TokenizerEnv for Env {
    fn tok_trie(&self) -> &TokTrie {
        &self.trie
    }

    fn tokenize_bytes(&self, s: &[u8]) -> Vec<u32> {
        (self.tokenize)(s)
    }
}

/// Bit flags of a token's bytes, for the guard's quick pass (see `guard.rs`).
pub(crate) const HAS_STRUCTURE: u8 = 1;
/// The token opens a parenthesis.
pub(crate) const OPENS: u8 = 2;
/// Only name characters (`[A-Za-z0-9_-]`).
pub(crate) const NAME_ONLY: u8 = 4;
/// Blanks, then name characters.
pub(crate) const BLANKS_THEN_NAME: u8 = 8;
/// Only blanks.
pub(crate) const BLANKS_ONLY: u8 = 16;

/// A vocabulary's token trie and llguidance's parser factory: what every constraint over one
/// tokenizer shares. Building it walks the whole vocabulary (a few hundred milliseconds for
/// Qwen's 151,936 rows), so a model keeps one.
pub struct TokenEnv {
    factory: ParserFactory,
    token_bytes: Vec<Vec<u8>>,
    flags: Vec<u8>,
    /// Per token, the blank bytes and newlines it starts with (for the blank-run bound).
    leads: Vec<Lead>,
    /// The longest of each over the vocabulary.
    max_lead: Lead,
    eos: Vec<u32>,
    tokenize: Arc<Tokenize>,
}

/// The most llguidance's parser needed reading one text ([`TokenEnv::figures`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ParserFigures {
    /// Bytes of the Lark text.
    pub grammar_bytes: usize,
    /// The most Earley items one token mask created (bounded by `step_max_items`).
    pub step_items: usize,
    /// The most lexer fuel one token mask spent (bounded by `step_lexer_fuel`).
    pub step_lexer_fuel: u64,
    /// Lexer states built by the end (bounded by `max_lexer_states`).
    pub lexer_states: usize,
    /// Lexer fuel spent in all, building included.
    pub lexer_fuel: u64,
}

/// Refuses a grammar text past [`MAX_GRAMMAR_BYTES`](crate::MAX_GRAMMAR_BYTES).
fn check_grammar_size(lark: &str) -> Result<(), GrammarError> {
    if lark.len() > crate::MAX_GRAMMAR_BYTES {
        return Err(GrammarError::TooLarge {
            input: "a grammar built from the domain".into(),
            what: "bytes of Lark",
            figure: lark.len(),
            limit: crate::MAX_GRAMMAR_BYTES,
        });
    }
    Ok(())
}

/// The blanks a token starts with: bytes, and newlines among them.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Lead {
    pub(crate) blanks: usize,
    pub(crate) newlines: usize,
}

impl Lead {
    /// The blanks that `bytes` start with (or, reversed, end with).
    pub(crate) fn of(bytes: impl Iterator<Item = u8>) -> Lead {
        let mut lead = Lead::default();
        for b in bytes.take_while(u8::is_ascii_whitespace) {
            lead.blanks += 1;
            lead.newlines += usize::from(b == b'\n');
        }
        lead
    }
}

impl std::fmt::Debug for TokenEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenEnv").field("vocab", &self.token_bytes.len()).field("eos", &self.eos).finish()
    }
}

impl TokenEnv {
    /// The environment of a vocabulary: `token_bytes[i]` is the text of logit row `i` as bytes
    /// (a special token as `0xFF` followed by its name, an unused row as no bytes), `eos` the
    /// ids that end a turn (allowed only where the grammar is complete), and `tokenize` the
    /// model's tokenizer on bytes.
    pub fn new(token_bytes: Vec<Vec<u8>>, eos: &[u32], tokenize: Box<Tokenize>) -> Result<Arc<TokenEnv>, GrammarError> {
        let first = *eos.first().ok_or_else(|| GrammarError::Env("no end-of-sequence token".into()))?;
        if let Some(&bad) = eos.iter().find(|&&e| e as usize >= token_bytes.len()) {
            return Err(GrammarError::Env(format!("end token {bad} is outside the vocabulary of {}", token_bytes.len())));
        }
        let info = TokRxInfo::new(token_bytes.len() as u32, first);
        let trie = TokTrie::from(&info, &token_bytes).with_eos_tokens(eos);
        let tokenize: Arc<Tokenize> = Arc::from(tokenize);
        let env: toktrie::TokEnv = Arc::new(Env { trie, tokenize: tokenize.clone() });
        let mut factory = ParserFactory::new_simple(&env).map_err(|e| GrammarError::Env(e.to_string()))?;
        factory.quiet();
        // Our limits, not llguidance's defaults (bounds.rs says why each is what it is).
        *factory.limits_mut() = crate::bounds::parser_limits();
        let flags = token_bytes
            .iter()
            .map(|b| {
                if b.first() == Some(&0xFF) {
                    return 0;
                }
                let mut f = 0;
                if b.iter().any(|c| matches!(c, b'(' | b')' | b' ' | b'\t' | b'\r' | b'\n' | b';')) {
                    f |= HAS_STRUCTURE;
                }
                if b.contains(&b'(') {
                    f |= OPENS;
                }
                let name = |c: &u8| c.is_ascii_alphanumeric() || *c == b'_' || *c == b'-';
                let blank = |c: &u8| matches!(c, b' ' | b'\t' | b'\r' | b'\n');
                let lead = b.iter().take_while(|c| blank(c)).count();
                if !b.is_empty() && lead == b.len() {
                    f |= BLANKS_ONLY;
                } else if !b.is_empty() && b[lead..].iter().all(name) {
                    f |= if lead == 0 { NAME_ONLY } else { BLANKS_THEN_NAME };
                }
                f
            })
            .collect();
        let leads: Vec<Lead> = token_bytes.iter().map(|b| Lead::of(b.iter().copied())).collect();
        let max_lead = Lead {
            blanks: leads.iter().map(|l| l.blanks).max().unwrap_or(0),
            newlines: leads.iter().map(|l| l.newlines).max().unwrap_or(0),
        };
        Ok(Arc::new(TokenEnv { factory, token_bytes, flags, leads, max_lead, eos: eos.to_vec(), tokenize }))
    }

    /// One byte per token plus an end token: for checking grammars against text (tests, and a
    /// user checking a file) with no model at hand.
    pub fn bytes() -> Arc<TokenEnv> {
        let mut words: Vec<Vec<u8>> = (0u8..=255).map(|b| vec![b]).collect();
        words.push(b"\xFF<|end|>".to_vec());
        let tokenize = Box::new(|s: &[u8]| s.iter().map(|&b| u32::from(b)).collect::<Vec<u32>>());
        TokenEnv::new(words, &[256], tokenize).expect("the byte vocabulary is well formed")
    }

    /// The model's tokens for `bytes`.
    pub fn tokenize(&self, bytes: &[u8]) -> Vec<u32> {
        (self.tokenize)(bytes)
    }

    /// Rows of the vocabulary.
    pub fn vocab_size(&self) -> usize {
        self.token_bytes.len()
    }

    /// The bytes of token `t`.
    pub fn token(&self, t: u32) -> &[u8] {
        self.token_bytes.get(t as usize).map_or(&[], Vec::as_slice)
    }

    /// An empty token set over this vocabulary.
    pub fn vocab_set(&self) -> toktrie::SimpleVob {
        toktrie::SimpleVob::alloc(self.token_bytes.len())
    }

    /// The ids that end a turn.
    pub fn eos(&self) -> &[u32] {
        &self.eos
    }

    pub(crate) fn lead(&self, t: u32) -> Lead {
        self.leads.get(t as usize).copied().unwrap_or_default()
    }

    pub(crate) fn max_lead(&self) -> Lead {
        self.max_lead
    }

    pub(crate) fn flags(&self, t: u32) -> u8 {
        self.flags.get(t as usize).copied().unwrap_or(0)
    }

    /// A matcher for a Lark grammar, or the grammar's error. A grammar past
    /// [`MAX_GRAMMAR_BYTES`](crate::MAX_GRAMMAR_BYTES) is refused before llguidance reads it.
    pub(crate) fn matcher(&self, lark: &str) -> Result<Matcher, GrammarError> {
        check_grammar_size(lark)?;
        let g = TopLevelGrammar::from_lark(lark.to_string());
        let m = Matcher::new(self.factory.create_parser(g));
        match m.get_error() {
            Some(e) => Err(GrammarError::Grammar(e)),
            None => Ok(m),
        }
    }

    /// What llguidance's parser needs to read `text` under `lark` byte by byte (use with
    /// [`TokenEnv::bytes`]), computing the token mask before every byte as decoding does: the
    /// figures [`parser_limits`](crate::parser_limits) bounds. Fails as [`TokenEnv::accepts`]
    /// does when `text` leaves the grammar.
    pub fn figures(&self, lark: &str, text: &str) -> Result<ParserFigures, GrammarError> {
        check_grammar_size(lark)?;
        let mut p = self
            .factory
            .create_parser(TopLevelGrammar::from_lark(lark.to_string()))
            .map_err(|e| GrammarError::Grammar(e.to_string()))?;
        p.start_without_prompt();
        let mut figures = ParserFigures { grammar_bytes: lark.len(), ..ParserFigures::default() };
        for t in self.tokenize(text.as_bytes()) {
            p.compute_mask().map_err(|e| GrammarError::Mask(e.to_string()))?;
            let step = p.last_step_stats();
            figures.step_items = figures.step_items.max(step.all_items);
            figures.step_lexer_fuel = figures.step_lexer_fuel.max(step.lexer_cost);
            p.consume_token(t).map_err(|e| GrammarError::Mask(e.to_string()))?;
        }
        let lexer = p.parser.lexer_stats();
        figures.lexer_states = lexer.num_states;
        figures.lexer_fuel = lexer.total_fuel_spent as u64;
        Ok(figures)
    }

    /// Whether `text` is a complete sentence of `lark` (byte by byte; use with [`TokenEnv::bytes`]).
    pub fn accepts(&self, lark: &str, text: &str) -> Result<(), GrammarError> {
        let mut m = self.matcher(lark)?;
        let toks = self.factory.tok_env().tokenize_bytes(text.as_bytes());
        for (i, t) in toks.iter().enumerate() {
            if let Err(e) = m.consume_token(*t) {
                let at = self.factory.tok_env().tok_trie().decode(&toks[..i]);
                let line = at.iter().filter(|&&b| b == b'\n').count() + 1;
                return Err(GrammarError::Rejected { offset: at.len(), line, message: e.to_string() });
            }
        }
        if m.is_accepting().unwrap_or(false) || m.is_stopped() {
            Ok(())
        } else {
            Err(GrammarError::Rejected { offset: text.len(), line: text.lines().count(), message: "the text ends before the grammar does".into() })
        }
    }
}
