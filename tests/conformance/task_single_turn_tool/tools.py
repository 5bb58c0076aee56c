"""The pantry the menu agent checks before it suggests a dish."""


def check_pantry(ingredient: str) -> dict:
    """Says whether the kitchen has an ingredient in stock.

    Args:
        ingredient: The ingredient to look for.
    """
    return {"ingredient": ingredient, "in_stock": ingredient.lower() != "saffron"}
