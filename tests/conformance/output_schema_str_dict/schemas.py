"""Two schemas that are not pydantic classes, as ADK's YAML can name any Python object.

`CITY` is the type `str`: ADK sends Gemini a string schema and stores the string the JSON
reply holds. `FACTS` is a JSON Schema written as a dict: ADK sends it as google-genai reads
it (upper-case types) and, on the OpenAI-compatible wire, as ADK's LiteLlm sends a dict
(made strict, named after its `title`). ADK validates neither: the value is stored as the
JSON parses, its keys in the order the model gave them.
"""

CITY = str

FACTS = {
    "title": "CityFacts",
    "type": "object",
    "properties": {
        "population": {"type": "integer", "description": "People living there."},
        "country": {"type": "string"},
    },
    "required": ["population", "country"],
}
