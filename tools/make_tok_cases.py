#!/usr/bin/env python3
"""Writes tests/fixtures/tok_hard_cases.txt: text that trips byte-level BPE
pre-tokenisers (scripts, digits, emoji, whitespace runs, contractions in odd
cases, control characters). Valid UTF-8, so JavaScript tokenizers read the
same text. Usage: python3 tools/make_tok_cases.py"""
import os

lines = [
    # letters in many scripts
    "Latin: café naïve façade Ångström œuvre Straße ĳssel Džemal",
    "Greek: Καλημέρα κόσμε, ΑΒΓ αβγ ϐϑϕ",
    "Cyrillic: Привет, мир! Ёжик в тумане. Ґ Є І Ї",
    "Arabic: مرحبا بالعالم ٠١٢٣٤٥٦٧٨٩ and Persian ۰۱۲۳",
    "Hebrew: שלום עולם עִבְרִית",
    "Devanagari: नमस्ते दुनिया ०१२३४५६७८९ क्षत्रिय",
    "Thai: สวัสดีชาวโลก ๑๒๓",
    "CJK: 你好，世界！日本語のテキスト、カタカナ、ひらがな。한국어 텍스트",
    "Ethiopic ሰላም ዓለም, Georgian გამარჯობა, Armenian Բարեւ, Tamil வணக்கம் ௧௨௩",
    "Digits: 1234567890 ３２１ ²³¹ ⅠⅡⅫ ½ ¾ ⁵⁶ 𝟘𝟙𝟚 ๑๒",
    "Math: 𝔄𝔅 𝐀𝐁𝐂 ∑∫∂ √2 ≈ 1.414 ≤ ≥ ≠ ∞",
    # emoji
    "Emoji: 😀😃😄 👍🏽 👨‍👩‍👧‍👦 🇫🇷🇯🇵 1️⃣ ❤️ 🏳️‍🌈 🧑🏿‍💻",
    "Emoji words: hello😀world 😀hello world😀 😀 😀  😀",
    # whitespace runs
    "spaces:  two   three    four     five      end",
    "tabs:\tone\t\ttwo\t\t\tthree",
    "mixed: \t \t  \t\t   x",
    "trailing spaces   ",
    "",
    "",
    "\n\n after blank lines",
    "crlf line\r",
    "nbsp\u00a0here and\u00a0\u00a0two, ideographic\u3000space, line\u2028separator, para\u2029sep, thin\u2009space",
    "   leading spaces",
    "\t\tleading tabs",
    # contractions
    "I'm you're we've she'll he'd it's don't can't won't",
    "I'M YOU'RE WE'VE SHE'LL HE'D IT'S DON'T",
    "I'm I'M i'M 'S 's ''s '' 's's 'll'll 'reve 'd'd",
    "rock'n'roll o'clock y'all ma'am 'tis",
    "curly: I’m you’re it’s — not ASCII apostrophes",
    "'s at start, and end's",
    # letter case inside words: GPT-4o's pattern splits before an upper-case
    # run and keeps contractions, in any case, with the word before them
    "camelCase HTTPServer iPhone McDonald'S XMLHttpRequest getHTTPResponseCode ABCdef abcDEF aBc",
    "CONTRACTIONS: DON'T I'M YOU'RE WE'VE SHE'LL HE'D It'S iT's they'Re X'S 'S",
    # long s after an apostrophe: a caseless (?i:'s) may take U+017F for s
    "it'\u017fx It'\u017f'S '\u017ftate x'\u017fome DON\u017f'T Stra\u017f\u017fe'\u017f",
    # title case (Lt), modifier letters (Lm), other letters (Lo), marks (M)
    "title \u01c5emal \u01c8ubljana \u01cb \u1f88; modifiers \u02b0\u02b2 \u02e2 \ua71d; e\u0301 \u0915\u094d\u0937\u093f \ufdfa",
    # punctuation keeps the line ends (and GPT-4o the slashes) after it
    "end.\nnext,\r\nnext;\n\nnext//\nurl/path/\n</div>\n  .\n\t\n",
    "digit groups: 1 12 123 1234 12345 123456 1234567 \u0661\u0662\u0663\u0664 12.5 x2y",
    # numbers and punctuation
    "numbers: 3.14159 1,000,000 -42 +7 0x1F 1e-5 2024-11-29 12:34:56 $9.99 100%",
    "punct: !!! ??? ... --- ___ ((()))) [[]] {{}} <<>> @@@ ### &&& *** ~~~",
    "email@example.com https://example.com/path?q=1&r=2#frag",
    "code: for (int i = 0; i < n; i++) { x[i] += y[i] * 2; }",
    "dashes — – - and quotes “double” ‘single’ «guillemets»",
    # control characters
    "controls: \x01\x02\x07 bell \x1b[31mred\x1b[0m del\x7f nul\x00nul",
    "zero\u200bwidth joiner\u200dnon\u200cjoiner bom\ufeff nel\u0085 vt\x0b ff\x0c",
    # special token in text
    "before<|endoftext|>after <|endoftext|> spaced",
    # long runs
    "a" * 300,
    " " * 50 + "x",
    "\n" * 20 + "y",
    "😀" * 40,
    "supercalifragilisticexpialidocious" * 8,
]
text = "\n".join(lines) + "\n"
path = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "tok_hard_cases.txt")
with open(path, "w", encoding="utf-8", newline="") as f:
    f.write(text)
print(f"wrote {path}: {len(text.encode())} bytes, {len(lines)} lines")
